#!/usr/bin/env bash
# Evaluator hardening on the GPU machine: builds the CLI, the GPU tests and the throughput bench
# (as gpu_build.sh does), then the honest-timing and eval GPU tests (red team, catalog, variants,
# KG_REGRESSION_RUNS runs of every honest kernel in every regime), then kg_bench_eval_throughput.
# Logs go to $LOG_DIR (default gpu-logs). RUNS (default 20) sets the regression's run count.
set -uo pipefail
export BUILD_TARGET="kernelgate kg_gpu_tests kg_bench_eval_throughput"
source "$(dirname "$0")/gpu_build.sh"
step() { # step NAME SECONDS CMD...: one logged step, cut at its limit
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$logs/$name.log" 2>&1
  echo "$name: exit $? in $((SECONDS - t0)) s"
}
step timing_tests 120 ./tests/kg_gpu_tests --gtest_filter="${TIMING_FILTER:-gpu_timing.*}"
grep -E 'FAILED|OK \]' "$logs/timing_tests.log" | head -40
[ -n "${SKIP_EVAL_TESTS:-}" ] || {
step red_team 300 ./tests/kg_gpu_tests --gtest_filter='gpu_eval.red_team*'
grep -E '^[a-z_0-9]+ +[a-z_0-9]+ +[A-Z_]+ ' "$logs/red_team.log" | cut -c1-150
grep -E 'Failure|Expected|Which is|: [A-Z_]+$|OK \]|FAILED' "$logs/red_team.log" | head -40
step catalog 300 ./tests/kg_gpu_tests --gtest_filter='gpu_eval.every_task*:gpu_eval.a_passing*'
grep -E 'FAILED|OK \]|speedup' "$logs/catalog.log" | head
}
if [ -n "${RUN_THROUGHPUT:-}" ]; then
  step throughput "${THROUGHPUT_TIMEOUT:-400}" ./bench/kg_bench_eval_throughput ${THROUGHPUT_ARGS:-}
  cat "$logs/throughput.log"
fi
# Where the regression's host time goes (timing/phase_log.h), summed by phase.
rm -f "$logs/regression_phases.log"
KG_PHASE_LOG="$logs/regression_phases.log" KG_REGRESSION_RUNS=${RUNS:-20} \
  step regression "${REGRESSION_TIMEOUT:-500}" \
  ./tests/kg_gpu_tests --gtest_filter='gpu_eval.honest_kernels*'
grep -E 'Failure|^run [0-9]+ |OK \]|FAILED' "$logs/regression.log" | head -80
awk '{s[$2] += $3; n[$2]++} END {for (k in s) printf "%s %.2f s (%d)\n", k, s[k], n[k]}' \
  "$logs/regression_phases.log" 2>/dev/null | sort -k2 -nr | head -30
echo "total: ${SECONDS}s"
