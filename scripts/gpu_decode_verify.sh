#!/usr/bin/env bash
# Decode-stack verification on the GPU machine (issue: workloads under test): builds as
# gpu_verify.sh does, then runs the GPU tests named by TEST_FILTER and the decode GEMV tests,
# the GEMV sweep (every configuration per projection and batch as a fraction of the copy
# bandwidth), and optionally the decode engine's tests and workloads. Logs go to $LOG_DIR.
#   TEST_FILTER=... (not GTEST_FILTER: gtest would apply that to every test binary)
#   SWEEP_ARGS=...  SWEEP_TIMEOUT=s  NO_SWEEP=1  RUN_EVAL_TORCH=1  RUN_ENGINE=1
#   RUN_ATTENTION=1: the decode kernels' GPU tests (split-KV attention in every configuration)
#     and kg_bench_attention_sweep (ATTENTION_SWEEP_ARGS=..., ATTENTION_TIMEOUT=s)
#   STEP_BATCHES=1,8,32,128: kg_bench_decode_step at those batches (each step's kernels, its
#     bound and SOL; STEP_TIMEOUT=s; STEP_ATTENTION=pick,merge,...: the step under each of
#     those attention configurations, kg_bench_decode_step --attention)
#   WORKLOADS="decode-qwen3-4b decode-colocated decode-colocated-training"  WORKLOAD_ARGS=...
#     WORKLOAD_TIMEOUT=s (default 300: decode-colocated-training at its defaults needs ~8-10 min;
#     shrink it with WORKLOAD_ARGS="--trace-seconds 4 --max-load-steps 16", docs/cli.md)
set -uo pipefail
source "$(dirname "$0")/gpu_build.sh"
if [ -n "${TEST_FILTER:-}" ]; then
  timeout 200 ./tests/kg_gpu_tests --gtest_filter="$TEST_FILTER" >"$logs/gpu_tests.log" 2>&1
  echo "kg_gpu_tests exit $?"
  grep -E '^\[  (FAILED|PASSED|  OK) |Failure|Expected|Which is|Value of|green contexts|softmax:|SKIP' \
    "$logs/gpu_tests.log" | head -40
fi
if [ -x ./tests/kg_gemv_gpu_tests ]; then
  timeout 120 ./tests/kg_gemv_gpu_tests >"$logs/gemv_gpu_tests.log" 2>&1
  echo "kg_gemv_gpu_tests exit $?"
  grep -E '^\[  (FAILED|PASSED|  OK) |Failure|Expected|Which is' "$logs/gemv_gpu_tests.log" | head -30
fi
if [ -n "${RUN_ENGINE:-}" ]; then
  timeout ${ENGINE_TEST_TIMEOUT:-200} ./tests/kg_decode_gpu_tests >"$logs/decode_gpu_tests.log" 2>&1
  echo "kg_decode_gpu_tests exit $?"
  grep -E '^\[  (FAILED|PASSED|SKIPPED) |Failure|differ|worst|beyond|green partition|skipped' \
    "$logs/decode_gpu_tests.log" | head -60
fi
if [ -n "${RUN_ATTENTION:-}" ]; then
  timeout ${ATTENTION_TIMEOUT:-300} ./tests/kg_decode_gpu_tests --gtest_filter='gpu_decode_kernels.*' \
    >"$logs/attention_tests.log" 2>&1
  echo "kg_decode_gpu_tests (gpu_decode_kernels.*) exit $?"
  grep -E '^\[  (FAILED|PASSED|SKIPPED|     OK) |Failure|differ|worst|beyond|config |other bits' \
    "$logs/attention_tests.log" | head -60
  timeout ${ATTENTION_TIMEOUT:-300} ./bench/kg_bench_attention_sweep ${ATTENTION_SWEEP_ARGS:-} \
    >"$logs/attention_sweep.txt" 2>&1
  echo "attention sweep exit $?"
  grep -E '^device|^copy bandwidth|FAIL' "$logs/attention_sweep.txt" | head -20
  sed -n '/^fraction of copy/,$p' "$logs/attention_sweep.txt"
fi
if [ -n "${STEP_BATCHES:-}" ]; then
  timeout ${STEP_TIMEOUT:-300} ./bench/kg_bench_decode_step --batches "$STEP_BATCHES" \
    --attention "${STEP_ATTENTION:-pick}" >"$logs/decode_step.txt" 2>&1
  echo "kg_bench_decode_step exit $?"
  grep -E '^copy bandwidth|^decode step|bound .* SOL|step span|gemv|attention_s|MB  read' "$logs/decode_step.txt"
fi
# The decode workloads (WORKLOADS="decode-qwen3-4b decode-colocated decode-colocated-training";
# WORKLOAD_ARGS for every one).
for w in ${WORKLOADS:-}; do
  timeout ${WORKLOAD_TIMEOUT:-300} ./suite/kernelgate workload run $w ${WORKLOAD_ARGS:-} \
    --out "$BUILD_DIR/workload-$w" >"$logs/workload_$w.txt" 2>&1
  echo "workload $w exit $?"
  tail -40 "$logs/workload_$w.txt"
done
if [ -z "${NO_SWEEP:-}" ]; then
  timeout ${SWEEP_TIMEOUT:-200} ./bench/kg_bench_gemv_sweep ${SWEEP_ARGS:-} >"$logs/gemv_sweep.txt" 2>&1
  echo "gemv sweep exit $?"
  grep -E 'copy bandwidth|best|^ *\{' "$logs/gemv_sweep.txt" | head -60
fi
if [ -n "${RUN_EVAL_TORCH:-}" ]; then
  (time timeout 200 ./suite/kernelgate eval --tasks "$root/data/tasks" \
    --candidates "$root/kernels/tasks" --cache /tmp/kg-eval-cache --torch-time fresh \
    --out /tmp/kg-eval-torch) >"$logs/eval_torch.txt" 2>&1
  echo "eval with LibTorch timing exit $?"; tail -5 "$logs/eval_torch.txt"
  python3 - /tmp/kg-eval-torch/result.json <<'PY' || true
import json, sys
r = json.load(open(sys.argv[1]))
rows = []
for x in r["records"]:
    if x.get("type") != "evaluation": continue
    t = x.get("torch_reference", {}).get("reference", {})
    rows.append((x["task"], x.get("candidate_us"), x.get("torch_us"), x.get("speedup_vs_torch"),
                 t.get("status"), (t.get("status_reason") or "")[:80]))
print(f"{'task':32} {'kernel us':>10} {'torch us':>10} {'vs torch':>9}  torch status")
for t, c, tu, s, st, why in rows:
    f = lambda v, p: f"{v:{p}}" if isinstance(v, (int, float)) else "-"
    print(f"{t:32} {f(c, '10.2f')} {f(tu, '10.2f')} {f(s, '9.3f')}  {st} {why}")
print("timed against LibTorch:", sum(1 for r in rows if r[2] is not None), "of", len(rows))
PY
fi
echo "total: ${SECONDS}s"
