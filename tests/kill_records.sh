#!/usr/bin/env bash
# kill -9 at random moments of `audit layernorm-affine --backend cpu` and `workload run
# lora-train-small`, KILLS times each (default 18: at least 30 kills in all, as runs that end
# first are not counted): every records.jsonl left behind must hold whole JSON lines (a record is
# one write(2) of its line), except at most its last, cut short -- a SIGKILL ends a write(2) of
# more than a page part way (docs/cli.md), and readers drop such a line (read_records). Usage:
# kill_records.sh KERNELGATE
set -u
kg=$1
kills=${KILLS:-18}
work=$(mktemp -d "${TMPDIR:-/tmp}/kg-kill-XXXXXX")
trap 'rm -rf "$work"' EXIT
bad=0 killed=0 lines_seen=0 torn=0
check() { # check FILE: every newline-ended line parses as JSON; a last line without one is torn
  local f=$1
  [ -s "$f" ] || return 0
  if [ "$(tail -c1 "$f" | od -An -c | tr -d ' ')" != '\n' ]; then
    torn=$((torn + 1))
  fi
  if ! python3 -c 'import json,sys
text=open(sys.argv[1]).read()
whole=text.split("\n")[:-1]  # what follows the last newline is a torn line, dropped
for l in whole:
    json.loads(l)
print(len(whole))' "$f" >"$work/n" 2>"$work/err"; then
    echo "a whole line of $f is not JSON: $(head -c 200 "$work/err")"
    bad=$((bad + 1))
  else
    lines_seen=$((lines_seen + $(cat "$work/n")))
  fi
}
for run in audit workload; do
  for i in $(seq 1 "$kills"); do
    out="$work/$run-$i"
    if [ $run = audit ]; then
      "$kg" audit layernorm-affine --backend cpu --out "$out" >/dev/null 2>&1 &
    else
      "$kg" workload run lora-train-small --steps 50 --out "$out" >/dev/null 2>&1 &
    fi
    pid=$!
    # A random moment in the first 3 s (the audit streams records from its first second).
    sleep "$(awk -v s="$RANDOM" 'BEGIN { srand(s); printf "%.3f", 0.2 + 2.8 * rand() }')"
    kill -9 "$pid" 2>/dev/null && killed=$((killed + 1))
    wait "$pid" 2>/dev/null
    check "$out/records.jsonl"
  done
done
echo "kill -9 loop: $killed kills, $lines_seen whole records read back, $torn torn last lines" \
  "(dropped by readers), $bad damaged files"
[ "$bad" -eq 0 ]
