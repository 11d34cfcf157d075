#!/usr/bin/env bash
# On the GPU machine: the co-located fraction before and after a change (issue 24: decode beside
# 16 LoRA jobs at the p99 limit, before and after the decode kernels changed). The suite's
# throughput-at-the-limit workloads solo and beside 16 LoRA jobs (FILTER) are run by a build of an
# earlier source tree and then by this tree's build, in one lease; `kernelgate compare` (this
# tree's) then prints both runs' fractions of solo with their intervals (docs/cli.md, compare).
#
# The earlier tree travels as an ignored folder, made on the CPU machine before the device call:
#   git archive BEFORE_COMMIT | (mkdir -p before-src && tar -x -C before-src)
# and carried (run's carry: [".deps", "before-src"]). Both builds take the Debian packages of
# .deps. A build and the runs outlast one device call, so the work runs in its own process
# session (setsid), which the machine keeps while it is held:
#   PHASE=start  starts it and waits up to WAIT_S seconds (default 560)
#   PHASE=wait   waits again (call within the machine's warm time)
# Knobs: FILTER (default the log-uniform band's production mix, solo and lora16), REPEATS (run's
# --repeats, default 3), HOLD (a path: the runs wait, after both builds, while it exists, so a
# call can time other work on the GPU while the builds take the CPUs, then remove it). Each call
# leaves summary.txt, the logs and, once done, compare.log in $LOG_DIR (the device's $OUT).
set -uo pipefail
phase=${PHASE:-start}
wait_s=${WAIT_S:-560}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
logs=${LOG_DIR:-$root/gpu-logs}
work="$root/nightly-colocation" # ignored by git (/nightly-*/); stays while the machine is held
before="$root/before-src"
filter=${FILTER:-'^serving\.throughput\.production\.log512-8192\.(solo|lora16)$'}
repeats=${REPEATS:-3}
hold=${HOLD:-}
mkdir -p "$logs"
if [ "$phase" = start ]; then
  [ -f "$before/scripts/gpu_build.sh" ] || {
    echo "no earlier tree in $before (git archive COMMIT | tar -x -C before-src, then carry it)"
    exit 2
  }
  rm -rf "$work" && mkdir -p "$work"
  ln -sfn "$root/.deps" "$before/.deps"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
    --format=csv >>"$work/summary.txt" 2>&1
  # Builds one after the other (each takes every core), then the runs: before first, then this
  # tree's, which starts its serving traces from the earlier run's warm-up models (--warm-from,
  # as a nightly does from its baseline) so the two differ by the code in the measured window.
  setsid bash -c "
    s=\$(date +%s)
    (LOG_DIR='$work/before-build' BUILD_DIR='$root/build-before' BUILD_TARGET=kernelgate \
      bash -c 'source \"$before/scripts/gpu_build.sh\"') >'$work/build-before.log' 2>&1
    echo \"build before: exit \$? in \$(( \$(date +%s) - s )) s\" >>'$work/summary.txt'
    s=\$(date +%s)
    (LOG_DIR='$work/after-build' BUILD_DIR='$root/build-gpu' BUILD_TARGET=kernelgate \
      bash -c 'source \"$root/scripts/gpu_build.sh\"') >'$work/build-after.log' 2>&1
    echo \"build after: exit \$? in \$(( \$(date +%s) - s )) s\" >>'$work/summary.txt'
    s=\$(date +%s)
    while [ -n '$hold' ] && [ -e '$hold' ]; do sleep 2; done
    echo \"held: \$(( \$(date +%s) - s )) s\" >>'$work/summary.txt'
    for side in before after; do
      kg='$root/build-before/suite/kernelgate'; warm=''
      if [ \$side = after ]; then kg='$root/build-gpu/suite/kernelgate'; warm='--warm-from $work/before'; fi
      s=\$(date +%s)
      \"\$kg\" run --suite nightly --filter '$filter' --repeats $repeats --out \"$work/\$side\" \
        --no-progress \$warm >\"$work/\$side.log\" 2>&1
      echo \"run \$side: exit \$? in \$(( \$(date +%s) - s )) s\" >>'$work/summary.txt'
    done
    '$root/build-gpu/suite/kernelgate' compare '$work/before' '$work/after' >'$work/compare.log' 2>&1
    echo \"compare: exit \$?\" >>'$work/summary.txt'
    touch '$work/done'
  " </dev/null >/dev/null 2>&1 &
fi
# Wait for the session (or the call's budget), then leave what exists in the logs folder.
t0=$SECONDS
while [ ! -f "$work/done" ] && [ $((SECONDS - t0)) -lt "$wait_s" ]; do sleep 5; done
[ -f "$work/done" ] && echo "done" || echo "still running after ${wait_s}s: call again with PHASE=wait"
cat "$work/summary.txt" 2>/dev/null
for f in summary.txt compare.log before.log after.log build-before.log build-after.log; do
  [ -f "$work/$f" ] && cp "$work/$f" "$logs/"
done
for side in before after; do
  [ -f "$work/$side/result.json" ] && cp "$work/$side/result.json" "$logs/$side-result.json"
done
[ -f "$work/compare.log" ] && cat "$work/compare.log"
exit 0
