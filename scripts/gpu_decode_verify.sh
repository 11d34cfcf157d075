#!/usr/bin/env bash
# The decode engine on a GPU machine: builds and runs kg_decode_gpu_tests (no LibTorch: quick),
# then, with `workload`, builds kernelgate and runs the decode workloads. Logs in $LOG_DIR
# (default ./gpu-logs).
#   scripts/gpu_decode_verify.sh [workload]
set -uo pipefail
mode=${1:-tests}
if [ "$mode" = workload ]; then
  export BUILD_TARGET="kg_decode_gpu_tests kernelgate"
else
  export BUILD_TARGET=kg_decode_gpu_tests
fi
source "$(dirname "$0")/gpu_build.sh"
./tests/kg_decode_gpu_tests >"$logs/decode_gpu_tests.log" 2>&1
echo "kg_decode_gpu_tests exit $?"
grep -E '^\[  (FAILED|PASSED|SKIPPED) |Failure|differ|worst|beyond|green partition|skipped' \
  "$logs/decode_gpu_tests.log" | head -60
if [ "$mode" = workload ]; then
  for w in decode-qwen3-4b decode-colocated; do
    ./suite/kernelgate workload run $w --out "$BUILD_DIR/workload-$w" >"$logs/workload_$w.txt" 2>&1
    echo "workload $w exit $?"
    cat "$logs/workload_$w.txt"
  done
fi
