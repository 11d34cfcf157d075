#!/usr/bin/env bash
# Progress output of long commands, under a pseudo-terminal (script(1)) and through a pipe:
# `mutants generate` and `audit checker --cmd` (both run without a GPU).
#  - a pipe: one plain line per item, no terminal control codes;
#  - a terminal: a bar with counts, elapsed time and ETA redrawn in place ("\r\033[K"), every
#    item's line kept, and the bar erased at the end;
#  - --no-progress on a terminal: the pipe's plain lines.
# Usage: progress_tty.sh KERNELGATE SCRATCH_PARENT
set -u
kg=$1
work="$2/progress-tty-$$"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
command -v script >/dev/null || { echo "SKIP: script(1) (util-linux) is not installed"; exit 77; }
fail=0
bad() { echo "FAIL: $*"; fail=1; }
esc=$'\033'

# --- mutants generate: 3 files ------------------------------------------------------------------
files=(--kernels kernels/tasks/relu.cu --kernels kernels/tasks/abs_fp32.cu
  --kernels kernels/tasks/softmax_lastdim.cu)
"$kg" mutants generate "${files[@]}" --out "$work/pipe" >"$work/pipe.txt" 2>&1 ||
  bad "mutants generate through a pipe: exit $?"
grep -q "$esc" "$work/pipe.txt" && bad "control codes in piped output"
n=$(grep -cE '^kernels/tasks/[a-z_0-9]+\.cu  [0-9]+ mutants$' "$work/pipe.txt")
[ "$n" = 3 ] || bad "piped output has $n item lines, not 3: $(head -5 "$work/pipe.txt")"

# script -q -e -c CMD FILE: CMD on a new pseudo-terminal, its exit code returned, the terminal's
# bytes in FILE (with a header and footer line that util-linux adds).
script -qec "'$kg' mutants generate ${files[*]} --out '$work/tty'" "$work/tty.txt" >/dev/null ||
  bad "mutants generate under a terminal: exit $?"
grep -q $'\r'"$esc"'\[K' "$work/tty.txt" || bad "no redrawn line under a terminal"
grep -aqE '\[[#.]{24}\] [0-3]/3  [0-9]+:[0-9]{2} elapsed, ETA' "$work/tty.txt" ||
  bad "no bar with counts, elapsed and ETA under a terminal: $(tr '\r\033' '|~' <"$work/tty.txt" | head -c 600)"
n=$(tr '\r' '\n' <"$work/tty.txt" | grep -caE "^${esc}\[Kkernels/tasks/[a-z_0-9]+\.cu  [0-9]+ mutants")
[ "$n" = 3 ] || bad "terminal output keeps $n item lines, not 3"
cmp -s "$work/pipe/catalog.jsonl" "$work/tty/catalog.jsonl" || bad "the catalogs differ"

script -qec "'$kg' mutants generate ${files[*]} --out '$work/tty2' --no-progress" \
  "$work/plain.txt" >/dev/null || bad "--no-progress under a terminal: exit $?"
grep -q "$esc" "$work/plain.txt" && bad "control codes with --no-progress on a terminal"

# --- audit checker --cmd: a shell checker over the relu mutants ---------------------------------
"$kg" mutants generate --kernels kernels/tasks/relu.cu --out "$work/cat" >/dev/null ||
  bad "mutants generate relu: exit $?"
python3 -c 'import json,sys
for l in open(sys.argv[1]):
    print(json.dumps({"id": json.loads(l)["id"], "status": "witnessed"}))' \
  "$work/cat/catalog.jsonl" >"$work/witnesses.jsonl"
mutants=$(wc -l <"$work/cat/catalog.jsonl")
audit=(audit checker --catalog "$work/cat" --witnesses "$work/witnesses.jsonl" --jobs 2
  --cmd "grep -q threadIdx {candidate}")
"$kg" "${audit[@]}" --out "$work/a1" >"$work/audit-pipe.txt" 2>&1 ||
  bad "audit checker through a pipe: exit $?"
n=$(grep -cE '^\[[0-9]+/[0-9]+\] [^ ]+  (killed|survived)  \([0-9.]+ s\)$' "$work/audit-pipe.txt")
[ "$n" -ge "$mutants" ] || bad "audit: $n item lines through a pipe for $mutants mutants"
grep -q "$esc" "$work/audit-pipe.txt" && bad "control codes in the audit's piped output"
script -qec "$(printf "%q " "$kg" "${audit[@]}" --out "$work/a2")" "$work/audit-tty.txt" \
  >/dev/null || bad "audit checker under a terminal: exit $?"
grep -aqE '\[[#.]{24}\] [0-9]+/[0-9]+  [0-9]+:[0-9]{2} elapsed, ETA' "$work/audit-tty.txt" ||
  bad "no audit bar under a terminal"

[ $fail = 0 ] && echo "progress: pipe and terminal output as documented"
exit $fail
