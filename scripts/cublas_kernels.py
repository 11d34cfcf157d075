#!/usr/bin/env python3
"""Which kernels cuBLAS runs for the decode projections (issue 24), on the GPU machine.

    cublas_kernels.py [--batches 1,2,...] [--json FILE]
    cublas_kernels.py --only PROJECTION:BATCH    just F.linear 4 times, no profiler, no flush
                                                 (a target for ncu: skip the first launch)

For each projection of the Qwen3-4B decode step and each batch: torch's F.linear in bf16 (what
a user of torch gets; kg_bench_gemv_sweep times cublasGemmEx, which may pick other kernels), the
L2 flushed before each call by a 256 MB write, under torch.profiler. Prints each call's kernels
with their grid, block, registers, shared memory and duration (the profiler's CUPTI activity
records: kernel time, no launch), the median over the calls. The kernel names carry cuBLAS's
tile shape and split-K choice; docs/performance.md reads them.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile

PROJECTIONS = {  # rows (output features) x k (input features), Qwen3-4B
    "qkv": (6144, 2560),
    "o_proj": (2560, 4096),
    "gate_up": (19456, 2560),
    "down": (2560, 9728),
    "lm_head": (151936, 2560),
}
CALLS = 10


def kernels_of_trace(path):
    """The trace's kernel events (name, grid, block, registers, smem, us), flush writes dropped."""
    with open(path, encoding="utf-8") as f:
        events = json.load(f).get("traceEvents", [])
    out = []
    for e in events:
        if e.get("cat") != "kernel":
            continue
        name, args = e.get("name", ""), e.get("args", {})
        if "elementwise" in name or "fill" in name.lower():  # the flush's memset-like writes
            continue
        out.append({"name": name, "grid": args.get("grid"), "block": args.get("block"),
                    "registers": args.get("registers per thread"),
                    "smem": args.get("shared memory"), "us": float(e.get("dur", 0.0))})
    return out


def profile_one(torch, rows, k, batch, flush):
    w = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16) / k**0.5
    x = torch.randn(batch, k, device="cuda", dtype=torch.bfloat16)
    torch.nn.functional.linear(x, w)  # (heuristics, workspace)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(CALLS):
            flush.fill_(1)
            torch.nn.functional.linear(x, w)
        torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        found = kernels_of_trace(path)
    finally:
        os.unlink(path)
    by_name = {}
    for kern in found:
        by_name.setdefault(kern["name"], []).append(kern)
    rows_out = []
    for name, ks in by_name.items():
        first = ks[0]
        rows_out.append({**first, "calls": len(ks), "us": statistics.median(x["us"] for x in ks)})
    return rows_out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", default="1,2,4,8,16,32,64,128")
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--only", help="PROJECTION:BATCH: F.linear 4 times (for ncu), nothing else")
    opt = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"cublas_kernels: torch is not installed: {e}", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("cublas_kernels: no CUDA device", file=sys.stderr)
        return 3
    torch.backends.cuda.matmul.allow_tf32 = False
    if opt.only:
        proj, b = opt.only.split(":")
        rows, k = PROJECTIONS[proj]
        w = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
        x = torch.randn(int(b), k, device="cuda", dtype=torch.bfloat16)
        for _ in range(4):
            torch.nn.functional.linear(x, w)
        torch.cuda.synchronize()
        return 0
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    batches = [int(b) for b in opt.batches.split(",")]
    table = []
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, "
          f"{torch.cuda.get_device_properties(0).multi_processor_count} SMs")
    for proj, (rows, k) in PROJECTIONS.items():
        for b in batches:
            for kern in profile_one(torch, rows, k, b, flush):
                row = {"projection": proj, "batch": b, **kern}
                table.append(row)
                print(f"{proj:8s} b{b:<4d} {kern['us']:8.2f} us  grid {kern['grid']} block "
                      f"{kern['block']} regs {kern['registers']} smem {kern['smem']} x{kern['calls']}"
                      f"  {kern['name'][:150]}")
    if opt.json:
        with open(opt.json, "w", encoding="utf-8") as f:
            json.dump(table, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
