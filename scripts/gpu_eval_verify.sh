#!/usr/bin/env bash
# Eval verification on the GPU machine: builds (as gpu_verify.sh does), runs the GPU tests, then
# `kernelgate eval` over the task catalog with its own kernels (all must pass strict) and over
# the red-team candidates, and `kernelgate fastp` on the catalog's result. Logs go to $LOG_DIR.
set -uo pipefail
source "$(dirname "$0")/gpu_build.sh"
timeout ${CTEST_TIMEOUT:-300} ctest -L gpu ${CTEST_ARGS:-} -V >"$logs/ctest_gpu.log" 2>&1
grep -E 'tests passed|\*\*\*Failed|Failure|Expected|Which is|Value of|: (PASSED|REWARD_HACK|TIMEOUT)' "$logs/ctest_gpu.log" | head -60
echo "ctest: ${SECONDS}s"
cache=/tmp/kg-eval-cache
(time timeout 200 ./suite/kernelgate eval --tasks "$root/data/tasks" --candidates "$root/kernels/tasks" \
  --cache $cache --out /tmp/kg-eval-catalog) >"$logs/eval_catalog.txt" 2>&1
echo "eval catalog exit $?"; cat "$logs/eval_catalog.txt"
./suite/kernelgate fastp /tmp/kg-eval-catalog/result.json >"$logs/fastp.txt" 2>&1; head -30 "$logs/fastp.txt"
./suite/kernelgate validate /tmp/kg-eval-catalog/result.json
# The kernel variants (kernels/variants/<task>/*.cu) must pass strict like the task kernels.
./suite/kernelgate eval --tasks "$root/data/tasks/qwen3_decode_*.json" --candidates "$root/kernels/variants" \
  --cache $cache --out /tmp/kg-eval-variants >"$logs/eval_variants.txt" 2>&1
echo "eval variants exit $?"; grep -v ' MISSING ' "$logs/eval_variants.txt" | cut -c1-200
# Where the catalog eval's time went: worker seconds per phase (correctness, timing).
python3 - /tmp/kg-eval-catalog/result.json <<'PY' || true
import json, sys
r = json.load(open(sys.argv[1]))
ev = [x for x in r["records"] if x["type"] == "evaluation"]
c = sum(x["detail"].get("worker", {}).get("seconds", 0) for x in ev)
p = sum(x["detail"].get("timing_prepare_worker", {}).get("seconds", 0) for x in ev)
t = sum(x["detail"].get("timing_worker", {}).get("seconds", 0) for x in ev)
print(f"pairs {len(ev)}: correctness worker {c:.1f} s, timing inputs {p:.1f} s, timing (GPU held alone) {t:.1f} s")
PY
# Three more full evals (cold, warm, correctness only): run on its own call, it may need minutes.
if [ -n "${RUN_THROUGHPUT:-}" ]; then
  timeout ${THROUGHPUT_TIMEOUT:-500} ./bench/kg_bench_eval_throughput >"$logs/eval_throughput.txt" 2>&1
  cat "$logs/eval_throughput.txt"
fi
# The Qwen3 decode kernels as fractions of the copy bandwidth (issue: workloads under test).
if [ -n "${RUN_DECODE:-}" ]; then
  timeout ${DECODE_TIMEOUT:-200} ./bench/kg_bench_decode_kernels >"$logs/decode_kernels.txt" 2>&1
  cat "$logs/decode_kernels.txt"
fi
# The workloads of the Qwen3-4B stack that run today (issue: workloads under test).
if [ -n "${RUN_WORKLOADS:-}" ]; then
  ./suite/kernelgate workload run lora-train-small --device cuda --out /tmp/kg-wl-small 2>&1 | tail -8
  timeout ${WORKLOAD_TIMEOUT:-300} ./suite/kernelgate workload run lora-train-qwen3-4b --steps 3 \
    --out /tmp/kg-wl-4b >"$logs/workload_4b.txt" 2>&1
  echo "lora-train-qwen3-4b exit $?"; tail -8 "$logs/workload_4b.txt"
fi
echo "total: ${SECONDS}s"
