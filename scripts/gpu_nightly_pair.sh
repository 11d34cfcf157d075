#!/usr/bin/env bash
# On the GPU machine: two full nightly runs of one build back to back, then `compare` between
# them (the issue's false-alarm count and the nightly's wall time, end to end). A pair outlasts
# one device call (10 minutes), so the pair runs in its own process session (setsid), which the
# machine keeps while it is held; each call of this script waits up to WAIT_S seconds for it.
#   PHASE=start  builds kernelgate, starts the pair, waits; ENGINE_TESTS=1 first builds and runs
#                the decode engine's GPU tests (ctest -L gpu -R "$ENGINE_TESTS_RE", default
#                decode|prefill|serving_warm) into engine.log; ENGINE_TESTS=after runs them
#                once the pair and its extras have ended (the pair's timing is not delayed)
#                AUDIT=1 first runs the checker-audit GPU tests and a small `audit checker
#                --protocol all` (AUDIT_TASKS) into audit.log, before the pair (the pair waits
#                for it; this call returns once it is done)
#                PRECHECK=REGEX first runs those nightly workloads (precheck.log) and starts
#                the pair only if they pass
#   PHASE=wait   waits for the pair started earlier (call again within the machine's warm time)
# Each call leaves the logs so far, the run folders (packed) and, once the pair has ended, the
# comparison in $LOG_DIR (the device's $OUT).
set -uo pipefail
phase=${PHASE:-start}
wait_s=${WAIT_S:-560}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
logs=${LOG_DIR:-$root/gpu-logs}
pair="$root/nightly-pair" # ignored by git; stays on the machine between calls
mkdir -p "$logs"
t0=$SECONDS
if [ "$phase" = start ]; then
  rm -rf "$pair" && mkdir -p "$pair"
  if [ -n "${KG_BIN:-}" ]; then # an already built kernelgate (a dry run of this script)
    kg=$KG_BIN
  else
    targets=kernelgate
    [ "${ENGINE_TESTS:-0}" != 0 ] && targets="$targets kg_decode_gpu_tests"
    [ "${AUDIT:-0}" = 1 ] && targets="$targets kg_gpu_tests"
    BUILD_TARGET=$targets source "$root/scripts/gpu_build.sh" || exit 1
    kg="$BUILD_DIR/suite/kernelgate"
    if [ "${ENGINE_TESTS:-0}" = 1 ]; then # (=after: at the end of the pair instead)
      ctest -L gpu -R "${ENGINE_TESTS_RE:-decode|prefill|serving_warm}" --timeout 300 >"$logs/engine.log" 2>&1
      grep -E "tests passed|tests failed|\(Failed\)" "$logs/engine.log"
    fi
  fi
  # PRECHECK=REGEX: those nightly workloads once before the pair, into precheck.log; the pair
  # does not start when they fail (a broken build costs a minute, not the lease).
  if [ -n "${PRECHECK:-}" ]; then
    s=$SECONDS
    timeout 300 "$kg" run --suite nightly --filter "$PRECHECK" --out "$pair/precheck" \
      --no-progress >"$logs/precheck.log" 2>&1
    rc=$?
    echo "precheck: exit $rc in $((SECONDS - s)) s"
    [ $rc = 0 ] || { tail -5 "$logs/precheck.log"; exit 1; }
  fi
  # The GPU before and after, in summary.txt (at most 8 files come back from the device).
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
    --format=csv >>"$pair/summary.txt" 2>&1
  # Each run's wall time is the process's, set-up included (`date` around it).
  audit_tasks=${AUDIT_TASKS:-'^(layernorm_affine_fp32|softmax_lastdim|rmsnorm_weight)$'}
  setsid bash -c "
    if [ '${AUDIT:-0}' = 1 ]; then
      s=\$(date +%s)
      (cd '${BUILD_DIR:-.}' && timeout 420 ctest -V -L gpu -R 'gpu_audit|example_checker' \
        --timeout 400) >'$pair/audit.log' 2>&1
      echo \"audit tests: exit \$? in \$(( \$(date +%s) - s )) s\" >>'$pair/summary.txt'
      s=\$(date +%s)
      '$kg' mutants generate --out '$pair/catalog' >>'$pair/audit.log' 2>&1
      timeout 300 '$kg' audit checker --protocol all --catalog '$pair/catalog' \
        --tasks '$audit_tasks' --workers 4 --out '$pair/audit' >>'$pair/audit.log' 2>&1
      echo \"audit: exit \$? in \$(( \$(date +%s) - s )) s\" >>'$pair/summary.txt'
    fi
    touch '$pair/audit_done'
    # The second run replays the first's serving warm-up models, as a nightly replays its
    # baseline's (docs/cli.md, run --warm-from).
    for n in 1 2; do
      s=\$(date +%s%N)
      warm=''; [ \$n = 2 ] && warm='--warm-from $pair/run1'
      '$kg' run --suite nightly --out \"$pair/run\$n\" --no-progress \$warm >\"$pair/run\$n.log\" 2>&1
      rc=\$?
      echo \"run\$n: exit \$rc in \$(( (\$(date +%s%N) - s) / 1000000 )) ms\" >>'$pair/summary.txt'
    done
    '$kg' compare '$pair/run1' '$pair/run2' >'$pair/compare.log' 2>&1
    echo \"compare: exit \$?\" >>'$pair/summary.txt'
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw \
      --format=csv >>'$pair/summary.txt' 2>&1
    # EXTRAS=1: the decode step's SOL fraction measured side by side, the workload's (its own
    # engine, programmatic and plain launches) against the suite's step workload, twice in turn;
    # then one smoke run end to end. EXTRAS=smoke: the smoke run alone.
    if [ '${EXTRAS:-0}' = 1 ]; then
      for k in 1 2; do
        '$kg' workload run decode-qwen3-4b --max-load-steps 1 --trace-seconds 1 \
          --out \"$pair/wl\$k\" >>'$pair/extras.log' 2>&1
        '$kg' run --suite nightly --filter '^step[.]decode[.]solo[.]b1[.]ctx2048\$' \
          --out \"$pair/st\$k\" --no-progress >>'$pair/extras.log' 2>&1
      done
      grep -h -o '\"sol_fraction\": [0-9.]*' \"$pair\"/wl*/*.json >>'$pair/extras.log' 2>&1
    fi
    if [ '${EXTRAS:-0}' != 0 ]; then
      s=\$(date +%s%N)
      '$kg' run --suite smoke --out \"$pair/smoke\" --no-progress >>'$pair/extras.log' 2>&1
      echo \"smoke: exit \$? in \$(( (\$(date +%s%N) - s) / 1000000 )) ms\" >>'$pair/summary.txt'
    fi
    if [ '${ENGINE_TESTS:-0}' = after ]; then
      (cd '${BUILD_DIR:-.}' && timeout 300 ctest -L gpu -R '${ENGINE_TESTS_RE:-decode|prefill|serving_warm}' \
        --timeout 240) >'$pair/engine.log' 2>&1
      grep -E 'tests passed|tests failed|[(]Failed[)]' '$pair/engine.log' >>'$pair/summary.txt'
    fi
    touch '$pair/done'" </dev/null >/dev/null 2>&1 &
fi
[ -d "$pair" ] || { echo "no pair started on this machine (PHASE=start first)"; exit 1; }
until_file=done
[ "$phase" = start ] && [ "${AUDIT:-0}" = 1 ] && until_file=audit_done
while [ ! -f "$pair/$until_file" ] && [ $((SECONDS - t0)) -lt "$wait_s" ]; do sleep 5; done
for n in 1 2; do
  [ -f "$pair/run$n.log" ] && echo "run$n: $(grep -c '^\[' "$pair/run$n.log") workloads done"
done
# Whatever exists comes back on every call (records are streamed: a run cut short keeps them).
# (engine.log after the pair travels in runs.tgz: at most 8 files come back)
cp $(ls "$pair"/*.log | grep -v '/engine.log$') "$pair"/summary.txt "$logs/" 2>/dev/null
(cd "$pair" && tar czf "$logs/runs.tgz" $(ls -d run1 run2 smoke st1 st2 wl1 wl2 audit precheck \
  engine.log 2>/dev/null))
if [ ! -f "$pair/done" ]; then
  tail -3 "$pair"/run*.log
  echo "pair still running: call again with PHASE=wait"
  exit 0
fi
cat "$pair/summary.txt"
tail -25 "$pair/compare.log"
