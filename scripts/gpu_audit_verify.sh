#!/usr/bin/env bash
# On the GPU machine: issue 21's checker audit end to end. The audit of all mutants outlasts one
# device call (10 minutes), so it runs in its own process session (setsid) and each call of this
# script waits up to WAIT_S seconds for it (as gpu_nightly_pair.sh does).
#   PHASE=start  builds kernelgate, then in the background: with REPORTS=1 an eval of
#                tests/red_team and a smoke run, both with --history, and `fastp` and `report`
#                on them (issue 22's real examples; the pages travel in witnesses.tgz); then
#                `mutants generate` + `audit checker --protocol all` over kernels/tasks and
#                kernels/variants (WORKERS GPU workers, default kernelgate's: half the cores,
#                1..8; the host time per phase in phases.log); then (TESTS=1, the default)
#                builds the GPU tests and runs ctest -L gpu -R 'gpu_audit|example_checker'
#                into tests.log; then the example Python checker on the 44 task kernels, 8 at
#                a time (each must be accepted: checker_controls in audit.log; CHECKER_CONTROLS=0
#                skips it); then, with
#                CMD=1, that checker through --cmd on the witnessed mutants (CMD_JOBS at once).
#                The audit goes first among the GPU jobs so that its wall time is its own.
#                With TESTS=first the GPU tests build and run in the foreground before anything
#                else starts. Every call prints the phase sums so far and, per task, the
#                candidates judged and where their seconds went.
#                With AB_KERNELS='GLOB ...', before all of that: the audit of those kernels' mutants
#                four times, inputs kept on the device and not (KERNELGATE_AUDIT_RESIDENT), in
#                turn, into ab.log (shown by every call). GPU_TESTS: ctest's -R for TESTS=1.
#   PHASE=wait   waits for what PHASE=start began
# At most 8 files come back: build.log, tests.log, audit.log, summary.json, kill_matrix.json,
# input_suites.json, cmd_summary.json, witnesses.tgz.
set -uo pipefail
phase=${PHASE:-start}
wait_s=${WAIT_S:-560}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
logs=${LOG_DIR:-$root/gpu-logs}
w="$root/audit-run" # ignored by git; stays on the machine between calls
mkdir -p "$logs"
t0=$SECONDS
if [ "$phase" = start ]; then
  rm -rf "$w" && mkdir -p "$w"
  # Only the CLI before the audit: the GPU tests build and run after it, so the audit's wall
  # time is its own.
  if [ "${TESTS:-1}" = first ]; then # the GPU tests in the foreground, before anything else
    BUILD_TARGET="kernelgate kg_gpu_tests" source "$root/scripts/gpu_build.sh" || exit 1
    s=$SECONDS
    ctest -L gpu -R "${GPU_TESTS:-gpu_audit|example_checker}" --timeout 600 >"$w/tests.log" 2>&1
    echo "tests: exit $? in $((SECONDS - s)) s" >>"$w/tests.log"
    grep -E "tests passed|tests failed|\(Failed\)|Skipped|^tests:" "$w/tests.log"
  else
    BUILD_TARGET=kernelgate source "$root/scripts/gpu_build.sh" || exit 1
  fi
  kg="$BUILD_DIR/suite/kernelgate"
  checker="python3 $root/examples/kernelbench_checker/checker.py"
  setsid bash -c "
    cd '$root'
    if [ '${REPORTS:-0}' = 1 ]; then
      s=\$(date +%s)
      h='$w/history.sqlite'
      '$kg' eval --tasks data/tasks --candidates tests/red_team --timeout 15 --history \$h \
        --out '$w/eval' --no-progress >'$w/reports.log' 2>&1
      echo \"eval: exit \$? in \$(( \$(date +%s) - s )) s\" >>'$w/reports.log'
      '$kg' fastp '$w/eval/result.json' --out '$w/fastp' >>'$w/reports.log' 2>&1
      '$kg' report '$w/eval/result.json' '$w/fastp/result.json' --html '$w/report-eval.html' \
        >>'$w/reports.log' 2>&1
      s=\$(date +%s)
      '$kg' run --suite smoke --history \$h --out '$w/smoke' --no-progress >>'$w/reports.log' 2>&1
      echo \"smoke: exit \$? in \$(( \$(date +%s) - s )) s\" >>'$w/reports.log'
      '$kg' report '$w/smoke' --history \$h --html '$w/report-smoke.html' >>'$w/reports.log' 2>&1
      '$kg' history \$h >>'$w/reports.log' 2>&1
      echo \"reports: exit \$?\" >>'$w/reports.log'
    fi
    if [ -n '${AB_KERNELS:-}' ]; then # the same small audit with inputs kept and not, side by side
      '$kg' mutants generate \$(for k in ${AB_KERNELS:-}; do echo --kernels \$k; done) \
        --out '$w/ab-catalog' >'$w/ab.log' 2>&1
      for r in 0 1 0 1; do
        s=\$(date +%s)
        KERNELGATE_AUDIT_RESIDENT=\$r '$kg' audit checker --protocol all --catalog '$w/ab-catalog' \
          --workers ${WORKERS:-0} --no-progress --out '$w/ab-\$r' >'$w/ab-\$r.log' 2>&1
        echo \"ab resident=\$r: exit \$? in \$(( \$(date +%s) - s )) s\" >>'$w/ab.log'
        grep -E '^(compile|judging|phases|witness)' '$w/ab-\$r.log' >>'$w/ab.log'
      done
    fi
    s=\$(date +%s)
    '$kg' mutants generate --out '$w/catalog' >>'$w/audit.log' 2>&1
    KG_PHASE_LOG='$w/phases.log' '$kg' audit checker --protocol all --catalog '$w/catalog' \
      --workers ${WORKERS:-0} --out '$w/audit' >>'$w/audit.log' 2>&1
    echo \"audit: exit \$? in \$(( \$(date +%s) - s )) s (generate included)\" >>'$w/audit.log'
    if [ '${TESTS:-1}' = 1 ]; then # (TESTS=first ran them before the audit)
      s=\$(date +%s)
      (cd '$BUILD_DIR' && cmake --build . --target kg_gpu_tests -j16 >'$w/tests.log' 2>&1 &&
        ctest -L gpu -R '${GPU_TESTS:-gpu_audit|example_checker}' --timeout 900 >>'$w/tests.log' 2>&1)
      echo \"tests: exit \$? in \$(( \$(date +%s) - s )) s\" >>'$w/audit.log'
    fi
    # The example checker on every task's own kernel, 8 at a time: each must be accepted.
    [ '${CHECKER_CONTROLS:-1}' = 1 ] && for t in kernels/tasks/*.cu; do
      ( id=\$(basename \$t .cu); d='$w'/cc/\$id; mkdir -p \$d
        $checker data/tasks/\$id.json \$t \$d >\$d.log 2>&1
        echo \"checker_controls \$id exit \$?\" ) &
      while [ \$(jobs -r | wc -l) -ge 8 ]; do sleep 1; done
    done >>'$w/audit.log' 2>&1
    wait
    if [ '${CMD:-0}' = 1 ]; then
      s=\$(date +%s)
      '$kg' audit checker --cmd '$checker {task} {candidate} {workdir}' --catalog '$w/catalog' \
        --witnesses '$w/audit/witnesses.jsonl' --jobs ${CMD_JOBS:-12} --timeout 120 \
        --out '$w/cmd' >>'$w/audit.log' 2>&1
      echo \"cmd: exit \$? in \$(( \$(date +%s) - s )) s\" >>'$w/audit.log'
    fi
    touch '$w/done'" </dev/null >/dev/null 2>&1 &
fi
[ -d "$w" ] || { echo "nothing started on this machine (PHASE=start first)"; exit 1; }
while [ ! -f "$w/done" ] && [ $((SECONDS - t0)) -lt "$wait_s" ]; do sleep 5; done
cp "$w/audit.log" "$w/tests.log" "$logs/" 2>/dev/null
[ -f "$w/ab.log" ] && cat "$w/ab.log"
# Where the time goes so far: phase sums, and per task where the candidates' seconds went.
python3 "$root/scripts/audit_seconds.py" "$w/phases.log" "$w/audit/verdicts.jsonl"
grep -E "^compile:" "$w/audit.log"
for f in summary.json kill_matrix.json input_suites.json; do
  cp "$w/audit/$f" "$logs/" 2>/dev/null
done
cp "$w/cmd/summary.json" "$logs/cmd_summary.json" 2>/dev/null
(cd "$w" && tar czf "$logs/witnesses.tgz" $(ls audit/witnesses.jsonl audit/verdicts.jsonl \
  cmd/verdicts.jsonl phases.log reports.log report-eval.html report-smoke.html eval/result.json \
  fastp/result.json 2>/dev/null)) 2>/dev/null
[ -f "$w/reports.log" ] && grep -E "^(eval|smoke|reports):" "$w/reports.log"
grep -E "tests passed|tests failed|\(Failed\)|Skipped" "$w/tests.log" 2>/dev/null
grep -c "^checker_controls .* exit 0$" "$w/audit.log" 2>/dev/null | sed 's/^/checker_controls accepted: /'
tail -15 "$w/audit.log"
[ -f "$w/done" ] || echo "still running: call again with PHASE=wait"
