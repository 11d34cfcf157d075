#!/usr/bin/env python3
"""Writes data/suites/nightly.json (160 workloads) and data/suites/smoke.json (12 of them, by id)
from the composition of issue 20 (/work/notes/issue20_contract.md, docs/suites.md). Deterministic:
the same script writes the same bytes, so a diff of the JSON is a diff of the suite.

    python3 scripts/make_suites.py [OUT_DIR]      (default: data/suites next to this script)

The speed-of-light quantities repeat workloads/qwen3.cpp's gemm_roofline, attention_roofline and
decode_step_roofline (tests/test_suite_def.cpp holds every workload's figure to them); the other
kernels' bytes are counted here, the formula in each workload's sol.note.
"""
import json
import os
import sys

# Qwen3-4B (workloads/qwen3.h, qwen3_config).
HIDDEN, INTER, LAYERS = 2560, 9728, 36
Q_HEADS, KV_HEADS, HEAD_DIM, VOCAB = 32, 8, 128, 151936
E = 2  # bytes per bf16 element

# workloads/qwen3.cpp, decode_gemms: (n, k) of y[b, n] = x[b, k] @ W[n, k]^T.
PROJECTIONS = {
    "qkv": (Q_HEADS * HEAD_DIM + 2 * KV_HEADS * HEAD_DIM, HIDDEN),
    "o_proj": (HIDDEN, Q_HEADS * HEAD_DIM),
    "gate_up": (2 * INTER, HIDDEN),
    "down": (HIDDEN, INTER),
    "lm_head": (VOCAB, HIDDEN),
}

# The implementation each kernel role runs today (a `kernelgate run --override ROLE=FILE.cu`
# replaces one of them).
DECODE_ROLES = {
    "gemv.qkv": "kernelgate.gemv_bf16",
    "gemv.o_proj": "kernelgate.gemv_bf16",
    "gemv.gate_up": "kernelgate.gemv_bf16",
    "gemv.down": "kernelgate.gemv_bf16",
    "gemv.lm_head": "kernelgate.gemv_bf16",
    "attention": "kernelgate.attention_splitkv",
    "rmsnorm": "kernelgate.add_rmsnorm",
    "qk_norm_rope": "kernelgate.qk_norm_rope_append",
    "silu_mul": "kernelgate.silu_gate_mul",
    "argmax": "kernelgate.argmax",
    "embedding": "kernelgate.embedding_gather",
}
LORA_ROLES = {"lora.matmul": "libtorch.matmul"}
# Serving adds the real prefill's roles (kernels/decode/decode_engine.h, prefill_chunk).
PREFILL_ROLES = {"prefill.attention": "kernelgate.attention_prefill",
                 "prefill.gemm": "cublas.gemm_ex"}

# Expected wall seconds on one H200 (the run's ETA and sharding read them; set-up excluded).
COST = {"kernel": 1.0, "step": 2.0, "serving_throughput": 12.0, "serving_p99": 5.0,
        "training": 10.0}

KERNEL_SECONDS = {"name": "kernel_seconds", "direction": "lower", "unit": "s"}
STEP_SECONDS = {"name": "step_seconds", "direction": "lower", "unit": "s"}
TOKENS_PER_SECOND = {"name": "tokens_per_second", "direction": "higher", "unit": "tokens/s"}
P99_ITL_MS = {"name": "p99_itl_ms", "direction": "lower", "unit": "ms"}

# The p99 workloads' fixed load: with real prefill, 4 sequences/s of the 2048-8192 band already
# ask ~20k prompt tokens/s of the ~35k the H200 engine prefills (docs/suites.md).
ITL_LIMIT_MS, OUTPUT_TOKENS, OFFERED_SEQUENCES_PER_SECOND = 50, 256, 4
# The serving scheduler's chunked prefill: prompt tokens per step (docs/architecture.md, Serving).
# A step carrying 2048 prompt tokens of a long prompt takes 55-60 ms on all SMs: prefills
# interrupting decode are what bind the 50 ms limit. With 512 the H200 saturated with p99 at
# 17-23 ms in every band and never met the limit (docs/performance.md, two nightly runs).
PREFILL_CHUNK_TOKENS = 2048
# Seconds of arrivals per serving trace: the measured window after the warm-up (docs/architecture.md,
# Serving: warm start). 1.5 s from an idle server gave a nightly of 636 s; a warm window is busy
# from its first step, so at 1.5 s the serving level would take about 250 s more, past the
# 15-minute budget. A warm second holds a steady batch, more tokens than the cold 1.5 s did.
TRACE_SECONDS = 1.0
LORA_RANK, LORA_SEQ = 8, 2048


def count(n, noun):
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def workload(id, level, kind, description, params, metric, sol, gates, roles, setup, cost):
    # The key order of the file (and of the contract).
    return {"id": id, "level": level, "kind": kind, "description": description,
            "params": params, "metric": metric, "sol": sol, "gates": gates, "roles": roles,
            "setup": setup, "cost_seconds": cost}


def bytes_sol(quantity, note):
    return {"bound": "bytes", "quantity": quantity, "ceiling": "copy_bandwidth", "note": note}


def kernel(id, kind, description, params, sol, roles):
    return workload(id, "kernel", kind, description, params, KERNEL_SECONDS, sol,
                    ["oracle_fp64"], roles, "kernels", COST["kernel"])


def gemm_bytes(n, k, batch):  # gemm_roofline(...).bytes
    return E * (n * k + batch * k + batch * n)


def attention_bytes(batch, context):  # attention_roofline(...).bytes: one layer
    return E * (2 * batch * KV_HEADS * context * HEAD_DIM + 2 * batch * Q_HEADS * HEAD_DIM)


def decode_step_bytes(batch, context):  # decode_step_roofline(...).bytes
    total = 0
    for name, (n, k) in PROJECTIONS.items():
        total += (1 if name == "lm_head" else LAYERS) * gemm_bytes(n, k, batch)
    return total + LAYERS * attention_bytes(batch, context)


def gemv_workloads():
    out = []
    for projection, (n, k) in PROJECTIONS.items():
        for batch in (1, 2, 4, 8, 16, 32):
            out.append(kernel(
                f"kernel.gemv.{projection}.b{batch}", "gemv",
                f"decode GEMV {projection} ({n}x{k} bf16 weight) at batch {batch}",
                {"projection": projection, "batch": batch, "n": n, "k": k},
                bytes_sol(gemm_bytes(n, k, batch),
                          "2*(n*k + batch*k + batch*n): the weight, x and y once each "
                          "(gemm_roofline)"),
                {f"gemv.{projection}": "kernelgate.gemv_bf16"}))
    return out


def attention_workloads():
    out = []
    for batch in (1, 8, 32):
        for context in (512, 2048, 8192):
            out.append(kernel(
                f"kernel.attention.b{batch}.ctx{context}", "attention",
                f"split-KV decode attention, one layer, {count(batch, 'sequence')} of {context} tokens",
                {"batch": batch, "context": context, "q_heads": Q_HEADS, "kv_heads": KV_HEADS,
                 "head_dim": HEAD_DIM},
                bytes_sol(attention_bytes(batch, context),
                          "2*(2*batch*kv_heads*context*head_dim + 2*batch*q_heads*head_dim): "
                          "one layer's K and V read, q in and o out (attention_roofline)"),
                {"attention": DECODE_ROLES["attention"]}))
    return out


def pointwise_workloads():
    out = []
    norm_note = {
        "rmsnorm": ("2*(2*batch*cols + cols): hidden read, out written, the weight once",
                    lambda b: E * (2 * b * HIDDEN + HIDDEN)),
        "add_rmsnorm": ("2*(4*batch*cols + cols): delta and hidden read, hidden and out "
                        "written, the weight once", lambda b: E * (4 * b * HIDDEN + HIDDEN)),
    }
    for kind, (note, quantity) in norm_note.items():
        what = "RMSNorm" if kind == "rmsnorm" else "residual add + RMSNorm"
        for batch in (1, 8, 32):
            out.append(kernel(f"kernel.{kind}.b{batch}", kind,
                              f"{what} of {count(batch, 'row')} of {HIDDEN}",
                              {"batch": batch, "cols": HIDDEN},
                              bytes_sol(quantity(batch), note),
                              {"rmsnorm": DECODE_ROLES["rmsnorm"]}))
    for batch in (1, 8, 32):
        qk = (Q_HEADS + KV_HEADS) * HEAD_DIM
        kv = KV_HEADS * HEAD_DIM
        out.append(kernel(
            f"kernel.qk_norm_rope.b{batch}", "qk_norm_rope",
            f"q/k head RMSNorm + RoPE + KV append of {count(batch, 'row')} at context 2048",
            {"batch": batch, "context": 2048},
            bytes_sol(E * (2 * batch * qk + batch * kv + 2 * batch * kv + 2 * HEAD_DIM),
                      "2*(2*batch*(q_heads+kv_heads)*head_dim + batch*kv_heads*head_dim + "
                      "2*batch*kv_heads*head_dim + 2*head_dim): q and k read and written in "
                      "place, v read, k and v appended to the cache, the two norm weights once"),
            {"qk_norm_rope": DECODE_ROLES["qk_norm_rope"]}))
    for batch in (1, 8, 32):
        out.append(kernel(f"kernel.silu_mul.b{batch}", "silu_mul",
                          f"SiLU(gate) * up of {count(batch, 'row')} of {INTER}",
                          {"batch": batch, "inter": INTER},
                          bytes_sol(E * 3 * batch * INTER,
                                    "2*3*batch*inter: gate and up read, out written"),
                          {"silu_mul": DECODE_ROLES["silu_mul"]}))
    for batch in (1, 8, 32):
        out.append(kernel(f"kernel.argmax.b{batch}", "argmax",
                          f"greedy argmax of {count(batch, 'row')} of {VOCAB} logits",
                          {"batch": batch, "cols": VOCAB},
                          bytes_sol(E * batch * VOCAB + 4 * batch,
                                    "2*batch*cols + 4*batch: the logits read, an int32 index "
                                    "written per row"),
                          {"argmax": DECODE_ROLES["argmax"]}))
    for batch in (1, 32):
        out.append(kernel(f"kernel.embedding.b{batch}", "embedding",
                          f"embedding gather of {count(batch, 'row')} of {HIDDEN}",
                          {"batch": batch, "cols": HIDDEN},
                          bytes_sol(E * 2 * batch * HIDDEN,
                                    "2*2*batch*cols: the gathered rows read, out written"),
                          {"embedding": DECODE_ROLES["embedding"]}))
    return out


def lora_gemm_workloads():
    q, v = Q_HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    ops = [  # (op, m, n, k, what): C[m, n] = A[m, k] @ B[k, n]
        ("q_base_fwd", LORA_SEQ, q, HIDDEN, "frozen q projection forward"),
        ("v_base_fwd", LORA_SEQ, v, HIDDEN, "frozen v projection forward"),
        ("lora_a_fwd", LORA_SEQ, LORA_RANK, HIDDEN, "LoRA A forward (x @ A)"),
        ("lora_b_fwd", LORA_SEQ, q, LORA_RANK, "LoRA B forward (xA @ B)"),
        ("lora_a_grad", LORA_RANK, HIDDEN, LORA_SEQ, "LoRA A gradient"),
        ("lora_b_grad", q, LORA_RANK, LORA_SEQ, "LoRA B gradient"),
    ]
    out = []
    for op, m, n, k, what in ops:
        if min(m, n, k) == LORA_RANK:  # skinny: moving the operands bounds it, not the FLOPs
            sol = bytes_sol(E * (m * k + k * n + m * n),
                            "2*(m*k + k*n + m*n): A, B read and C written once (a rank-8 "
                            "dimension: bytes bound it, not FLOPs)")
        else:
            sol = {"bound": "flops", "quantity": 2 * m * n * k, "ceiling": "bf16_dense_peak",
                   "note": "2*m*n*k: a multiply-add per (m, n, k)"}
        out.append(kernel(f"kernel.lora_gemm.{op}", "lora_gemm",
                          f"LoRA training GEMM {op}: {what}, {m}x{n}x{k}, sequence {LORA_SEQ}",
                          {"op": op, "m": m, "n": n, "k": k, "rank": LORA_RANK, "seq": LORA_SEQ},
                          sol, dict(LORA_ROLES)))
    return out


def decode_step_workloads():
    out = []
    for placement in ("solo", "colocated"):
        for batch in (1, 4, 8, 32):
            for context in (512, 2048, 8192):
                where = ("on all SMs" if placement == "solo" else
                         "on the decode partition beside one LoRA training job")
                gates = ["logits_finite"]
                if placement == "colocated":
                    gates.append("logits_bit_identical_to_solo")
                out.append(workload(
                    f"step.decode.{placement}.b{batch}.ctx{context}", "step", "decode_step",
                    f"Qwen3-4B decode step, batch {batch}, context {context}, {where}",
                    {"batch": batch, "context": context, "placement": placement}, STEP_SECONDS,
                    bytes_sol(decode_step_bytes(batch, context),
                              "every layer's weights once (lm_head once) + 36 layers' KV "
                              "cache and activations (decode_step_roofline)"),
                    gates, dict(DECODE_ROLES),
                    "engine.whole" if placement == "solo" else "engine.partition.lora1",
                    COST["step"]))
    return out


MIXES = {"all1": "every request 1 sequence", "all8": "every request 8 sequences",
         "production": "requests of 1/2/4/8 sequences at 40/30/20/10%"}
BANDS = {"512-2048": "contexts uniform in 512-2048", "2048-8192": "contexts uniform in 2048-8192",
         "log512-8192": "contexts log-uniform in 512-8192"}
TENANTS = {"solo": ("engine.whole", "decode on all SMs"),
           "partition": ("engine.partition.idle", "decode alone on its partition"),
           "hog": ("engine.partition.hog", "decode beside a bandwidth hog"),
           "lora1": ("engine.partition.lora1", "decode beside 1 LoRA rank-8 training job"),
           "lora4": ("engine.partition.lora4", "decode beside 4 LoRA rank-8 training jobs"),
           "lora16": ("engine.partition.lora16", "decode beside 16 LoRA rank-8 training jobs")}


def serving_combos():
    """(mix, band, tenant): solo over every mix and band; each other tenant over the production
    mix in every band, and all1 and all8 in the log-uniform band."""
    combos = [(m, b, "solo") for m in MIXES for b in BANDS]
    for tenant in list(TENANTS)[1:]:
        combos += [("production", b, tenant) for b in BANDS]
        combos += [(m, "log512-8192", tenant) for m in ("all1", "all8")]
    return combos


def serving_workloads():
    out = []
    for metric in ("throughput", "p99"):
        for mix, band, tenant in serving_combos():
            setup, where = TENANTS[tenant]
            params = {"request_mix": mix, "context_band": band, "tenant": tenant,
                      "itl_limit_ms": ITL_LIMIT_MS, "output_tokens": OUTPUT_TOKENS,
                      "prefill_chunk_tokens": PREFILL_CHUNK_TOKENS,
                      "trace_seconds": TRACE_SECONDS}
            if metric == "throughput":
                kind, m, gates = "serving_throughput", TOKENS_PER_SECOND, ["load_within_limit"]
                what = f"throughput at p99 inter-token latency <= {ITL_LIMIT_MS} ms"
            else:
                kind, m, gates = "serving_p99", P99_ITL_MS, ["kv_admitted_all"]
                params["offered_sequences_per_second"] = OFFERED_SEQUENCES_PER_SECOND
                what = f"p99 inter-token latency at {OFFERED_SEQUENCES_PER_SECOND} sequences/s"
            out.append(workload(
                f"serving.{metric}.{mix}.{band}.{tenant}", "serving", kind,
                f"{what}; {MIXES[mix]}, {BANDS[band]}, {OUTPUT_TOKENS} output tokens; {where}",
                params, m, None, gates, dict(DECODE_ROLES, **PREFILL_ROLES), setup,
                COST[kind]))
    return out


def training_workloads():
    out = []
    for placement in ("solo", "beside_decode"):
        for jobs in (1, 4, 16):
            where = ("on the whole GPU" if placement == "solo" else
                     "on the training partition beside the decode engine")
            out.append(workload(
                f"training.lora.jobs{jobs}.{placement}", "training", "lora_training",
                f"Qwen3-4B LoRA rank-{LORA_RANK} q/v training step, {count(jobs, 'job')}, sequence "
                f"{LORA_SEQ}, {where}",
                {"jobs": jobs, "placement": placement, "rank": LORA_RANK, "seq": LORA_SEQ,
                 "targets": ["q", "v"]},
                STEP_SECONDS, None,
                ["loss_rel_1e-3_vs_reference", "params_grads_rel_1e-2_vs_reference",
                 "bf16_step_vs_fp32", "losses_finite"],
                dict(LORA_ROLES),
                "training.whole" if placement == "solo" else f"engine.partition.lora{jobs}",
                COST["training"]))
    return out


SMOKE = ["kernel.gemv.down.b1", "kernel.gemv.lm_head.b8", "kernel.gemv.qkv.b32",
         "kernel.attention.b1.ctx2048", "kernel.attention.b32.ctx8192", "kernel.add_rmsnorm.b8",
         "kernel.argmax.b1", "step.decode.solo.b1.ctx2048", "step.decode.solo.b32.ctx8192",
         "step.decode.colocated.b8.ctx2048", "serving.p99.production.log512-8192.solo",
         "training.lora.jobs1.solo"]


def nightly():
    workloads = (gemv_workloads() + attention_workloads() + pointwise_workloads() +
                 lora_gemm_workloads() + decode_step_workloads() + serving_workloads() +
                 training_workloads())
    ids = [w["id"] for w in workloads]
    assert len(workloads) == 160 and len(set(ids)) == 160, len(workloads)
    return {"schema": "kernelgate.suite/1", "name": "nightly",
            "description": "The nightly regression suite: Qwen3-4B decode kernels, decode steps "
                           "solo and co-located, serving throughput and p99 latency over request "
                           "mixes, context bands and tenants, and LoRA training (docs/suites.md)",
            "workloads": workloads}


def smoke(ids):
    assert all(i in ids for i in SMOKE) and len(set(SMOKE)) == 12
    return {"schema": "kernelgate.suite/1", "name": "smoke",
            "description": "The pre-merge smoke gate: 12 workloads of nightly, one or more of "
                           "each level (docs/suites.md)",
            "base": "nightly.json", "select": SMOKE}


def write(path, doc):
    with open(path, "w") as f:
        f.write(json.dumps(doc, indent=2) + "\n")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "data", "suites")
    os.makedirs(out, exist_ok=True)
    n = nightly()
    write(os.path.join(out, "nightly.json"), n)
    write(os.path.join(out, "smoke.json"), smoke({w["id"] for w in n["workloads"]}))


if __name__ == "__main__":
    main()
