#!/usr/bin/env bash
# On the GPU machine: parts of issue 21's whole-catalog audit, for device calls shorter than the
# audit. `mutants generate` over kernels/tasks and kernels/variants, the tasks split into PARTS
# groups of about equal mutant counts (largest first, each to the lightest group: the same split
# on every machine), then `audit checker --protocol all` over each listed group's tasks, one
# after the other, into audit-parts/part-I (kept on the machine; its summary, kill matrix,
# verdicts, witnesses, input suites and phase log into $OUT/part-I.tgz once it has finished;
# part-I.partial.tgz while it runs). A finished part
# comes back with the next call that ends, even if the machine is released during a later part.
# On this machine, after every part:
#   kernelgate audit merge OUT1/part-1 OUT2/part-2 ... --out catalog
# gives the catalog's scores, with the parts' phase times summed (docs/cli.md, audit merge).
#   PART     the groups to run, in order ("1", or "1 2 3")   PARTS  how many groups (default 4)
#   LIMIT_S  stop a part's audit after this many seconds (default 480): an interrupted part
#            keeps its verdicts and `audit merge` reports it incomplete
#   PHASE    now (default): build and run the parts in this call;
#            start: build, run the parts in their own process session, wait up to WAIT_S;
#            wait: wait up to WAIT_S more for what start began.
# Prints each group's tasks, each audit's last lines and its phase times.
set -uo pipefail
parts=${PARTS:-4}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/scripts/gpu_chain.sh" # (sets phase, w, logs and t0)

copy_back() { # the chain's log and each finished part's files (one archive a part: the
  # device returns at most 8 files), into $logs
  cat "$w/chain.log" 2>/dev/null
  cp "$w/chain.log" "$logs/" 2>/dev/null
  for d in "$w"/part-*/; do
    local p
    p=$(basename "$d")
    local name=$p
    # A part still running sends what it has streamed so far (its verdicts and witnesses, one
    # record a line), under its own name: a call that ends mid-part loses none of it.
    [ -f "$w/$p.done" ] || name=$p.partial
    tar czf "$logs/$name.tgz" -C "$d" $(cd "$d" && ls summary.json kill_matrix.json verdicts.jsonl \
      witnesses.jsonl input_suites.json phases.log 2>/dev/null)
  done
}

if [ "$phase" != wait ]; then
  BUILD_TARGET=kernelgate source "$root/scripts/gpu_build.sh" || exit 1
  cd "$root"
  kg="$BUILD_DIR/suite/kernelgate"
  [ -f "$w/catalog/summary.json" ] || "$kg" mutants generate --out "$w/catalog" >"$logs/generate.log" 2>&1
  rm -f "$w/chain.done"
  # One part: its group's tasks, the audit under LIMIT_S, the marker that it came to an end.
  run_parts="
    for part in ${PART:?set PART to one or more of 1..PARTS}; do
      regex=\$(python3 - '$w/catalog/summary.json' \$part $parts <<'PY'
import json, sys
tasks = json.load(open(sys.argv[1]))['tasks']
part, parts = int(sys.argv[2]), int(sys.argv[3])
groups = [[0, []] for _ in range(parts)]
for name, n in sorted(tasks.items(), key=lambda t: (-t[1], t[0])):
    g = min(groups, key=lambda g: g[0])
    g[0] += n
    g[1].append(name)
print('^(' + '|'.join(sorted(groups[part - 1][1])) + ')\$')
PY
)
      echo \"part \$part of $parts: \$regex\"
      out='$w'/part-\$part
      rm -rf \"\$out\" '$w'/part-\$part.done
      mkdir -p \"\$out\"
      s=\$(date +%s)
      KG_PHASE_LOG=\"\$out/phases.log\" timeout -s INT ${LIMIT_S:-480} '$kg' audit checker \
        --protocol all --catalog '$w/catalog' --tasks \"\$regex\" --no-progress \
        --out \"\$out\" >'$w'/part-\$part.log 2>&1
      echo \"part \$part: audit exit \$? in \$(( \$(date +%s) - s )) s\"
      tail -25 '$w'/part-\$part.log
      python3 scripts/audit_seconds.py \"\$out/phases.log\" /dev/null | head -14
      touch '$w'/part-\$part.done
    done
    touch '$w/chain.done'"
  start_chain "$run_parts"
fi
wait_chain
