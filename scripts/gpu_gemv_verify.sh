#!/usr/bin/env bash
# On the GPU machine: issue 24's GEMV work in one device call. Builds the GEMV's GPU tests and its
# sweep, runs the tests (every family against the fp64 oracle, bitwise repeats), then times the
# families beside cuBLAS in one process (kg_bench_gemv_sweep; cuBLAS through the same timer).
#   KINDS    the sweep's --kinds (default wgmma,wgmma_tma: the newest families; each (shape,
#            batch) row of the table is timed too, and cuBLAS)
#   BATCHES  the sweep's --batches (default 1,2,4,8,16,32,64,128)
#   SHAPES   the sweep's --shapes (default all five projections)
#   BACKEND  the sweep's --backend (default counters: ncu's kernel duration; events where the
#            CUPTI range profiler is unavailable)
#   TESTS    0 skips the GPU tests
#   FIRST    a ctest regex run alone before the others (a kernel that may hang, say); if it
#            fails, nothing else runs
#   TEST_TIMEOUT  seconds a test may take (default 900)
# Logs into $LOG_DIR (default gpu-logs): build.log, tests.log, sweep.log.
set -uo pipefail
BUILD_TARGET="kg_gemv_gpu_tests kg_gemv_unit_tests kg_bench_gemv_sweep" \
  source "$(dirname "${BASH_SOURCE[0]}")/gpu_build.sh" || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
if [ "${TESTS:-1}" != 0 ]; then
  s=$SECONDS
  if [ -n "${FIRST:-}" ]; then
    ctest -R "$FIRST" --timeout "${TEST_TIMEOUT:-900}" >"$logs/tests-first.log" 2>&1
    rc=$?
    echo "first tests ($FIRST): exit $rc in $((SECONDS - s)) s"
    grep -E "tests passed|tests failed|\(Failed\)|Timeout" "$logs/tests-first.log"
    # A kernel that hung there would hang the sweep too: stop before it.
    [ "$rc" = 0 ] || exit "$rc"
  fi
  ctest -R 'gpu_gemv|gemv_config' ${FIRST:+-E "$FIRST"} --timeout "${TEST_TIMEOUT:-900}" >"$logs/tests.log" 2>&1
  echo "tests: exit $? in $((SECONDS - s)) s"
  grep -E "tests passed|tests failed|\(Failed\)" "$logs/tests.log"
fi
s=$SECONDS
./bench/kg_bench_gemv_sweep --kinds "${KINDS:-wgmma,wgmma_tma}" --batches "${BATCHES:-1,2,4,8,16,32,64,128}" \
  ${SHAPES:+--shapes $SHAPES} --backend "${BACKEND:-counters}" >"$logs/sweep.log" 2>&1
echo "sweep: exit $? in $((SECONDS - s)) s"
# The table rows and ours against cuBLAS, from the end of the sweep's output.
sed -n '/^best configuration per/,$p' "$logs/sweep.log" | cut -c1-220
