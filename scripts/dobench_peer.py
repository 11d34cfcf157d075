#!/usr/bin/env python3
"""The real peer figure: triton.testing.do_bench on the four ops of docs/performance.md's timing loop, in N
fresh processes, printing per op the median of the per-process medians and the CV across
processes. Runs on the GPU machine (torch + triton installed there)."""
import statistics
import subprocess
import sys

OPS = ["layer_norm", "matmul", "softmax", "gemv"]


def child():
    import torch
    import triton.testing as tt

    torch.manual_seed(0)
    dev = "cuda"
    x_ln = torch.randn(8192, 4096, device=dev, dtype=torch.float16)
    w_ln = torch.randn(4096, device=dev, dtype=torch.float16)
    b_ln = torch.randn(4096, device=dev, dtype=torch.float16)
    a = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    xs = torch.randn(64, 1024, device=dev, dtype=torch.float32)
    w = torch.randn(9728, 2560, device=dev, dtype=torch.bfloat16)
    v = torch.randn(2560, device=dev, dtype=torch.bfloat16)
    fns = {
        "layer_norm": lambda: torch.nn.functional.layer_norm(x_ln, (4096,), w_ln, b_ln),
        "matmul": lambda: a @ b,
        "softmax": lambda: torch.softmax(xs, dim=-1),
        "gemv": lambda: w @ v,
    }
    for op in OPS:
        ms = tt.do_bench(fns[op], warmup=25, rep=100, return_mode="median")
        print(op, ms * 1000.0, flush=True)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child()
        return
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    runs = {op: [] for op in OPS}
    for _ in range(rounds):
        out = subprocess.run([sys.executable, __file__, "--child"], capture_output=True, text=True,
                             check=True).stdout
        for line in out.splitlines():
            op, us = line.split()
            runs[op].append(float(us))
    print("triton do_bench (torch ops), %d fresh processes" % rounds)
    print("%-12s %14s %9s" % ("op", "median us", "CV"))
    for op in OPS:
        x = runs[op]
        print("%-12s %14.2f %8.2f%%" % (op, statistics.median(x),
                                        100 * statistics.stdev(x) / statistics.mean(x)))


if __name__ == "__main__":
    main()
