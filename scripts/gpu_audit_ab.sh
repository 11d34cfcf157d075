#!/usr/bin/env bash
# On the GPU machine: the checker audit's speed, configurations side by side on one sample of the
# whole catalog, then the example outside checker against the kernelbench protocol on it. Longer
# than one device call, so it runs in its own process session and each call waits up to WAIT_S.
#   PHASE=start  builds kernelgate, then in the background:
#                1. bench/worker_start.py --concurrent, plain and with each CTX_ENVS entry
#                   (VAR=VALUE), into ctx.log: what a CUDA context costs to come up (CTX=0
#                   skips it);
#                2. `mutants generate` over every kernel, every STEP-th mutant kept (default 16:
#                   about 270 of 4,339, every task), into sample/;
#                3. with CMD=1: `audit checker --protocol all` on the tasks AGREE_TASKS matches
#                   (a regex, default every task of the sample), then the example checker
#                   (examples/kernelbench_checker) through --cmd on its witnessed mutants and
#                   controls (CMD_JOBS at once), then `audit agreement` against its kernelbench
#                   column;
#                4. per CONFIGS entry (MODE:WORKERS[:VAR=VALUE...], MODE fresh or resident, each
#                   VAR=VALUE after a colon), the audit of the sample's AB_TASKS (default all)
#                   with `--protocol all`, a cold compile cache of its own, at most LIMIT_S
#                   seconds, its phase sums into ab.log, and the machine's load while it ran
#                   (vmstat: mean user, system and idle CPU; nvidia-smi: mean and p90 GPU
#                   utilization, read only).
#                Every audit's worker count: WORKERS entries, default 8.
#   PHASE=wait   waits for what PHASE=start began
# Files back: build.log, ctx.log, ab.log, agreement.txt, agreement.json, cmd_summary.json,
# verdicts-ab-N.jsonl (per configuration), verdicts-agree.jsonl, verdicts-cmd.jsonl, phases.tgz
# (every audit's phase log).
set -uo pipefail
phase=${PHASE:-start}
wait_s=${WAIT_S:-560}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
logs=${LOG_DIR:-$root/gpu-logs}
w="$root/audit-ab" # ignored by git; stays on the machine between calls
mkdir -p "$logs"
t0=$SECONDS
if [ "$phase" = start ]; then
  rm -rf "$w" && mkdir -p "$w"
  BUILD_TARGET=kernelgate source "$root/scripts/gpu_build.sh" || exit 1
  kg="$BUILD_DIR/suite/kernelgate"
  checker="python3 $root/examples/kernelbench_checker/checker.py"
  setsid bash -c "
    cd '$root'
    [ '${CTX:-1}' = 1 ] && python3 bench/worker_start.py '$BUILD_DIR/suite' 3 --concurrent >'$w/ctx.log' 2>&1
    [ '${CTX:-1}' = 1 ] && for e in ${CTX_ENVS:-}; do
      echo \"with \$e:\" >>'$w/ctx.log'
      env \$e python3 bench/worker_start.py '$BUILD_DIR/suite' 3 --concurrent >>'$w/ctx.log' 2>&1
    done
    '$kg' mutants generate --out '$w/catalog' >'$w/ab.log' 2>&1
    mkdir -p '$w/sample'
    awk '(NR - 1) % ${STEP:-16} == 0' '$w/catalog/catalog.jsonl' >'$w/sample/catalog.jsonl'
    echo \"sample: \$(wc -l <'$w/sample/catalog.jsonl') mutants, every ${STEP:-16}th\" >>'$w/ab.log'
    if [ '${CMD:-0}' = 1 ]; then
      s=\$(date +%s)
      KG_PHASE_LOG='$w/phases-agree.log' '$kg' audit checker --protocol all --catalog '$w/sample' \
        --tasks '${AGREE_TASKS:-.*}' --no-progress --out '$w/agree' >'$w/agree.log' 2>&1
      echo \"protocols (tasks ${AGREE_TASKS:-.*}): exit \$? in \$(( \$(date +%s) - s )) s, \$(wc -l <'$w/agree/verdicts.jsonl') candidates judged\" >>'$w/ab.log'
      grep -E '^(compile|witness|every)' '$w/agree.log' >>'$w/ab.log'
      s=\$(date +%s)
      '$kg' audit checker --cmd '$checker {task} {candidate} {workdir}' --catalog '$w/sample' \
        --tasks '${AGREE_TASKS:-.*}' --witnesses '$w/agree/witnesses.jsonl' --jobs ${CMD_JOBS:-12} \
        --timeout 120 --no-progress --out '$w/cmd' >'$w/cmd.log' 2>&1
      echo \"cmd: exit \$? in \$(( \$(date +%s) - s )) s\" >>'$w/ab.log'
      tail -12 '$w/cmd.log' >>'$w/ab.log'
      '$kg' audit agreement '$w/agree' '$w/cmd' --checkers kernelbench,cmd \
        --json '$w/agreement.json' >'$w/agreement.txt' 2>&1
      echo \"agreement: exit \$?\" >>'$w/ab.log'
      head -4 '$w/agreement.txt' >>'$w/ab.log'
    fi
    i=0
    for c in ${CONFIGS:-}; do
      i=\$((i + 1))
      mode=\${c%%:*}; rest=\${c#*:}; workers=\${rest%%:*}; extra=\${rest#*:}
      [ \"\$extra\" = \"\$rest\" ] && extra=
      r=0; [ \$mode = resident ] && r=1
      s=\$(date +%s)
      command -v vmstat >/dev/null && { vmstat -n 2 >'$w/vmstat-'\$i.log & }
      vp=\$!
      nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 500 \
        >'$w/gpu-'\$i.log 2>/dev/null &
      gp=\$!
      env \${extra//:/ } KERNELGATE_AUDIT_RESIDENT=\$r KERNELGATE_CACHE='$w/cache-'\$i \
        KG_PHASE_LOG='$w/phases-'\$i.log timeout ${LIMIT_S:-240} '$kg' audit checker \
        --protocol all --catalog '$w/sample' --tasks '${AB_TASKS:-.*}' --workers \$workers \
        --no-progress --out '$w/ab-'\$i >'$w/ab-'\$i.log 2>&1
      rc=\$?
      kill \$vp \$gp 2>/dev/null
      echo \"config \$i (\$c): exit \$rc in \$(( \$(date +%s) - s )) s, \$(wc -l <'$w/ab-'\$i/verdicts.jsonl) candidates judged\" >>'$w/ab.log'
      grep -E '^(compile|witness|every)' '$w/ab-'\$i.log >>'$w/ab.log'
      python3 scripts/audit_seconds.py '$w/phases-'\$i.log /dev/null | head -12 >>'$w/ab.log'
      awk 'NR > 3 { us += \$13; sy += \$14; id += \$15; wa += \$16; n++ }
           END { if (n) printf \"cpu: user %.0f%%, system %.0f%%, idle %.0f%%, io wait %.0f%% (%d samples)\\n\", us/n, sy/n, id/n, wa/n, n }' \
        '$w/vmstat-'\$i.log >>'$w/ab.log' 2>/dev/null
      sort -n '$w/gpu-'\$i.log | awk '{ v[NR] = \$1; s += \$1 }
           END { if (NR) printf \"gpu utilization: mean %.0f%%, p90 %d%% (%d samples)\\n\", s/NR, v[int(NR*0.9)+0], NR }' \
        >>'$w/ab.log' 2>/dev/null
    done
    touch '$w/done'" </dev/null >/dev/null 2>&1 &
fi
[ -d "$w" ] || { echo "nothing started on this machine (PHASE=start first)"; exit 1; }
while [ ! -f "$w/done" ] && [ $((SECONDS - t0)) -lt "$wait_s" ]; do sleep 5; done
for f in ctx.log ab.log agreement.txt agreement.json; do cp "$w/$f" "$logs/" 2>/dev/null; done
cp "$w/cmd/summary.json" "$logs/cmd_summary.json" 2>/dev/null
(cd "$w" && ls phases-*.log >/dev/null 2>&1 && tar czf "$logs/phases.tgz" phases-*.log)
for d in "$w"/ab-*/ "$w"/agree/ "$w"/cmd/; do
  [ -f "$d/verdicts.jsonl" ] && cp "$d/verdicts.jsonl" "$logs/verdicts-$(basename "$d").jsonl"
done
cat "$w/ctx.log" 2>/dev/null
cat "$w/ab.log" 2>/dev/null
head -40 "$w/agreement.txt" 2>/dev/null
[ -f "$w/done" ] || echo "still running: call again with PHASE=wait"
