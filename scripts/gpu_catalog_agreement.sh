#!/usr/bin/env bash
# On the GPU machine, after a whole-catalog `audit checker --protocol all` (its folder carried in
# as CATALOG_IN: summary.json, kill_matrix.json, verdicts.jsonl, witnesses.jsonl, or those
# gzipped, as in data/results):
#   1. the tasks RERUN (a regex; none if empty) audited again with --protocol all (a fix that
#      came after the catalog run), merged with the catalog run by `audit merge`;
#   2. the example outside checker (examples/kernelbench_checker) through `audit checker --cmd`
#      on a sample of SAMPLE witnessed mutants of the merged audit (stratified by task, every
#      control too: docs/cli.md), JOBS calls at once, stopped after CMD_LIMIT_S seconds (its
#      streamed verdicts kept);
#   3. `audit agreement` of the merged audit's kernelbench column and the --cmd column.
# Into $LOG_DIR (default gpu-logs): chain.log, rerun.tgz, merged.tgz, cmd.tgz (verdicts, kill
# matrix, summary), agreement.txt and agreement.json; cmd.partial.tgz while the --cmd audit runs.
#   KG_BIN a kernelgate binary to use instead of building one; CHECKER_CMD another --cmd.
#   PHASE  now (default): build and run here; start: build, run the chain in its own process
#          session, wait up to WAIT_S; wait: wait up to WAIT_S more for what start began.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/scripts/gpu_chain.sh" # (sets phase, w, logs and t0)

pack() { # pack NAME DIR: DIR's result files into $logs/NAME.tgz
  [ -d "$2" ] || return 0
  tar czf "$logs/$1.tgz" -C "$2" $(cd "$2" && ls summary.json kill_matrix.json verdicts.jsonl \
    witnesses.jsonl input_suites.json 2>/dev/null) 2>/dev/null
}
copy_back() {
  cat "$w/chain.log" 2>/dev/null
  cp "$w/chain.log" "$logs/" 2>/dev/null
  [ -f "$w/rerun.done" ] && pack rerun "$w/rerun"
  [ -f "$w/merged.done" ] && pack merged "$w/merged"
  if [ -f "$w/cmd.done" ]; then pack cmd "$w/cmd"; else pack cmd.partial "$w/cmd"; fi
  cp "$w/agreement.txt" "$w/agreement.json" "$logs/" 2>/dev/null
  return 0
}

if [ "$phase" != wait ]; then
  if [ -n "${KG_BIN:-}" ]; then # (a kernelgate built already: a dry run of the chain)
    kg=$KG_BIN
  else
    BUILD_TARGET=kernelgate source "$root/scripts/gpu_build.sh" || exit 1
    kg="$BUILD_DIR/suite/kernelgate"
  fi
  cd "$root"
  checker="python3 $root/examples/kernelbench_checker/checker.py {task} {candidate} {workdir}"
  [ -n "${CHECKER_CMD:-}" ] && checker=$CHECKER_CMD
  in=$(cd "${CATALOG_IN:?carry a whole-catalog audit folder and name it}" && pwd)
  if ls "$in"/*.gz >/dev/null 2>&1; then # a gzipped folder (data/results): unpacked beside
    mkdir -p "$w/catalog-in"
    for f in "$in"/*.gz; do gunzip -c "$f" >"$w/catalog-in/$(basename "$f" .gz)"; done
    in="$w/catalog-in"
  fi
  [ -f "$w/catalog/summary.json" ] || "$kg" mutants generate --out "$w/catalog" >"$logs/generate.log" 2>&1
  rm -rf "$w/rerun" "$w/merged" "$w/cmd" "$w"/*.done "$w/agreement.txt" "$w/agreement.json"
  chain="
    set -u
    merged='$in'
    if [ -n '${RERUN:-}' ]; then
      s=\$(date +%s)
      '$kg' audit checker --protocol all --catalog '$w/catalog' --tasks '${RERUN:-}' \
        --no-progress --out '$w/rerun' >'$w/rerun.log' 2>&1
      echo \"rerun of ${RERUN:-}: exit \$? in \$(( \$(date +%s) - s )) s\"
      grep -v '^\[' '$w/rerun.log' | tail -14
      touch '$w/rerun.done'
      '$kg' audit merge '$in' '$w/rerun' --out '$w/merged' >'$w/merge.log' 2>&1
      echo \"merge: exit \$?\"; tail -14 '$w/merge.log'
      merged='$w/merged'
      touch '$w/merged.done'
    fi
    s=\$(date +%s)
    timeout -s INT ${CMD_LIMIT_S:-900} '$kg' audit checker \
      --cmd '$checker' \
      --catalog '$w/catalog' --witnesses \"\$merged/witnesses.jsonl\" --sample ${SAMPLE:-800} \
      --jobs ${JOBS:-16} --timeout 240 --no-progress --out '$w/cmd' >'$w/cmd.log' 2>&1
    echo \"cmd: exit \$? in \$(( \$(date +%s) - s )) s\"
    grep -v '^\[' '$w/cmd.log' | tail -16
    touch '$w/cmd.done'
    '$kg' audit agreement \"\$merged\" '$w/cmd' --checkers kernelbench,cmd \
      --json '$w/agreement.json' >'$w/agreement.txt' 2>&1
    echo \"agreement: exit \$?\"; head -40 '$w/agreement.txt'
    touch '$w/chain.done'"
  start_chain "$chain"
fi
wait_chain
