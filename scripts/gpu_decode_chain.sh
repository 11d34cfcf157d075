#!/usr/bin/env bash
# On the GPU machine: issue 24's decode checks as one chain that outlasts a device call
# (gpu_chain.sh), so a lease's time goes to the GPU and not to waiting between calls. One build of
# every target they need, then, one after the other (a step is skipped when its knob is empty):
#   1. GEMV_TESTS (a ctest regex, default 'gpu_gemv|gemv_config'): the GEMV families against the
#      fp64 oracle and their bitwise repeats; GEMV_FIRST (a regex) runs alone before them, and
#      if it fails nothing else in the chain runs (a kernel that hangs would hang the rest).
#   2. SWEEP_1, SWEEP_2: kg_bench_gemv_sweep arguments, each one sweep (--backend counters is
#      added), e.g. "--kinds wgmma_pk --shapes gate_up,qkv --batches 1,2,4".
#   3. DECODE_TESTS (default 'gpu_decode'): kg_decode_gpu_tests (the engine, the partitions, the
#      attention in every configuration of the sweep).
#   4. ATTENTION_SWEEP (default "--max-wall 0.3"): kg_bench_attention_sweep's arguments.
#   5. STEP_BATCHES (default 1,8,32,128), STEP_ATTENTION (default pick) and STEP_NORMS (default
#      fold,kernels): kg_bench_decode_step.
#   6. COLOCATION=1 (default off): scripts/gpu_colocation_before_after.sh to its end (the earlier
#      tree carried as before-src; its builds reuse build-gpu), its logs in the chain's.
# TEST_TIMEOUT (default 450) bounds each ctest test. PHASE=start builds (in the call) and starts
# the chain, PHASE=wait waits again; each call sends back summary.txt (each step's exit and
# seconds, and its key lines) and chain-logs.tgz (every step's whole log) into $LOG_DIR.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/scripts/gpu_chain.sh" # (sets phase, w, logs and t0)
cl="$w/decode-chain"

copy_back() {
  cat "$cl/summary.txt" 2>/dev/null
  cp "$cl/summary.txt" "$logs/" 2>/dev/null
  tar czf "$logs/chain-logs.tgz" -C "$cl" . 2>/dev/null
}

if [ "$phase" != wait ]; then
  BUILD_TARGET="kg_gemv_gpu_tests kg_gemv_unit_tests kg_bench_gemv_sweep kg_decode_gpu_tests \
kg_bench_decode_step kg_bench_attention_sweep" source "$root/scripts/gpu_build.sh" || exit 1
  rm -rf "$cl" "$w/chain.done" && mkdir -p "$cl"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
    --format=csv >"$cl/summary.txt" 2>&1
  q() { printf '%q' "$1"; } # a knob's value quoted for the chain's shell
  # The knobs' defaults (an empty value skips the step; ${X-default}: set but empty stays empty).
  gemv_tests=${GEMV_TESTS-'gpu_gemv|gemv_config'} decode_tests=${DECODE_TESTS-gpu_decode}
  attention_args=${ATTENTION_SWEEP-'--max-wall 0.3'} step_batches=${STEP_BATCHES-1,8,32,128}
  timeout_s=${TEST_TIMEOUT:-450}
  steps="
    cd $(q "$BUILD_DIR")
    step() { # NAME LOG-GREP COMMAND...: runs COMMAND into NAME.log, a summary line and key lines
      local name=\$1 keys=\$2 s=\$(date +%s); shift 2
      \"\$@\" >$(q "$cl")/\$name.log 2>&1
      local rc=\$?
      echo \"\$name: exit \$rc in \$(( \$(date +%s) - s )) s\" >>$(q "$cl/summary.txt")
      grep -E \"\$keys\" $(q "$cl")/\$name.log | cut -c1-240 | head -60 >>$(q "$cl/summary.txt")
      return \$rc
    }
    tests='tests passed|tests failed|\\(Failed\\)|Timeout'
    if [ -n $(q "${GEMV_FIRST:-}") ]; then
      step gemv-first \"\$tests\" ctest -R $(q "${GEMV_FIRST:-}") --timeout $timeout_s ||
        { touch $(q "$w/chain.done"); exit 1; }
    fi
    [ -z $(q "$gemv_tests") ] ||
      step gemv-tests \"\$tests\" ctest -R $(q "$gemv_tests") ${GEMV_FIRST:+-E $(q "$GEMV_FIRST")} \
        --timeout $timeout_s
    sweep_keys='^copy bandwidth|^best configuration|^  [a-z_]+ b[0-9]+ |ahead|behind|tie|FAIL|WRONG'
    [ -z $(q "${SWEEP_1:-}") ] ||
      step sweep-1 \"\$sweep_keys\" ./bench/kg_bench_gemv_sweep ${SWEEP_1:-} --backend counters
    [ -z $(q "${SWEEP_2:-}") ] ||
      step sweep-2 \"\$sweep_keys\" ./bench/kg_bench_gemv_sweep ${SWEEP_2:-} --backend counters
    [ -z $(q "$decode_tests") ] ||
      step decode-tests \"\$tests|SKIP|green partition|differ\" ctest -R $(q "$decode_tests") \
        --timeout $timeout_s
    [ -z $(q "$attention_args") ] ||
      step attention-sweep '^copy bandwidth|read ceiling|^  b[0-9]|FAIL|WRONG' \
        ./bench/kg_bench_attention_sweep $attention_args
    [ -z $(q "$step_batches") ] ||
      step decode-step '^copy bandwidth|^decode step|SOL|read-ceiling|attention_s|gemv' \
        ./bench/kg_bench_decode_step --batches $(q "$step_batches") \
        --attention $(q "${STEP_ATTENTION:-pick}") --norms $(q "${STEP_NORMS:-fold,kernels}")
    [ -z $(q "${COLOCATION:-}") ] ||
      step colocation '^build|^run|^compare|^done|fraction|FASTER|SLOWER|SAME|AMBIGUOUS|^no ' \
        env PHASE=start WAIT_S=3000 LOG_DIR=$(q "$cl/colocation") \
        bash $(q "$root/scripts/gpu_colocation_before_after.sh")
    touch $(q "$w/chain.done")"
  start_chain "$steps"
fi
wait_chain
