#!/usr/bin/env bash
# On the GPU machine: runs the binaries scripts/gpu_pack.sh packed into prebuilt/ (carried), each
# step's log and a summary into $OUT (or gpu-logs). A step runs when its knob is set:
#   GEMV_TESTS, DECODE_TESTS: gtest filters for kg_gemv_gpu_tests / kg_decode_gpu_tests ('*': all)
#   SWEEP: kg_bench_gemv_sweep arguments (--backend counters is added)
#   STEP: kg_bench_decode_step arguments, e.g. "--batches 1,8 --norms fold,kernels"
#   ATTENTION: kg_bench_attention_sweep arguments, e.g. "--config tc --config tile64-s2"
# TEST_TIMEOUT (default 300) bounds each step. The binaries link the GPU machine's CUDA toolkit
# libraries (cuBLAS, CUPTI), found under /usr/local/cuda. Exit: 0, or the first failing step's.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
logs=${OUT:-${LOG_DIR:-$root/gpu-logs}}
mkdir -p "$logs"
s=$logs/summary.txt
pb=$root/prebuilt
cd "$pb" || { echo "no prebuilt/ (carry it: scripts/gpu_pack.sh)"; exit 1; }
echo "binaries from $(cat commit 2>/dev/null)" >"$s"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv >>"$s" 2>&1
./zstd --long=29 -d -q -c kg.tar.zst | tar x || { echo "unpack failed" | tee -a "$s"; exit 1; }
for p in /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib64 \
  /usr/local/cuda/extras/CUPTI/lib64; do
  [ -d "$p" ] && LD_LIBRARY_PATH=$p${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
done
export LD_LIBRARY_PATH
rc=0
step() { # NAME BINARY ARGS...: runs into NAME.log; its exit and seconds, and key lines, to the summary
  local n=$1 bin=$2 t0=$SECONDS
  shift 2
  [ -x "$bin" ] || { echo "$n: $bin was not packed" >>"$s"; [ "$rc" -ne 0 ] || rc=1; return; }
  timeout "${TEST_TIMEOUT:-300}" "$bin" "$@" >"$logs/$n.log" 2>&1
  local e=$?
  echo "$n: exit $e in $((SECONDS - t0)) s" >>"$s"
  grep -E "PASSED|FAILED|SKIP|^copy bandwidth|^decode step|SOL|ahead|behind|best" "$logs/$n.log" |
    grep -v '^\[       OK' | cut -c1-200 | head -60 >>"$s"
  [ "$e" -eq 0 ] || [ "$rc" -ne 0 ] || rc=$e
}
[ -z "${GEMV_TESTS:-}" ] || step gemv-tests tests/kg_gemv_gpu_tests --gtest_filter="$GEMV_TESTS"
[ -z "${DECODE_TESTS:-}" ] ||
  step decode-tests tests/kg_decode_gpu_tests --gtest_filter="$DECODE_TESTS"
# shellcheck disable=SC2086 # the knobs are argument lists
[ -z "${SWEEP:-}" ] || step sweep bench/kg_bench_gemv_sweep $SWEEP --backend counters
# shellcheck disable=SC2086
[ -z "${ATTENTION:-}" ] || step attention bench/kg_bench_attention_sweep $ATTENTION
# shellcheck disable=SC2086
[ -z "${STEP:-}" ] || step decode-step bench/kg_bench_decode_step $STEP
cat "$s"
exit "$rc"
