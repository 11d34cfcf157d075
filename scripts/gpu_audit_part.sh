#!/usr/bin/env bash
# On the GPU machine: one part of issue 21's whole-catalog audit, for device calls shorter than
# the audit. `mutants generate` over kernels/tasks and kernels/variants, the tasks split into
# PARTS groups of about equal mutant counts (largest first, each to the lightest group: the same
# split on every machine), then `audit checker --protocol all` over group PART's tasks into
# audit-parts/part-PART (kept on the machine; its summary, kill matrix, verdicts and witnesses
# also into $OUT/part-PART, which come back). On this machine, after every part:
#   kernelgate audit merge OUT1/part-1 OUT2/part-2 ... --out catalog
# gives the catalog's scores, with the parts' phase times summed (docs/cli.md, audit merge).
#   PART     which group (1..PARTS)          PARTS   how many (default 4)
#   LIMIT_S  stop the audit after this many seconds (default 480): an interrupted part keeps its
#            verdicts and `audit merge` reports it incomplete
# Prints the group's tasks, the audit's last lines and the phase times.
set -uo pipefail
part=${PART:?set PART=1..PARTS}
parts=${PARTS:-4}
BUILD_TARGET=kernelgate source "$(dirname "${BASH_SOURCE[0]}")/gpu_build.sh" || exit 1
cd "$root"
kg="$BUILD_DIR/suite/kernelgate"
w="$root/audit-parts"
mkdir -p "$w"
[ -f "$w/catalog/summary.json" ] || "$kg" mutants generate --out "$w/catalog" >"$logs/generate.log" 2>&1
regex=$(python3 - "$w/catalog/summary.json" "$part" "$parts" <<'PY'
import json, sys
tasks = json.load(open(sys.argv[1]))["tasks"]
part, parts = int(sys.argv[2]), int(sys.argv[3])
groups = [[0, []] for _ in range(parts)]
for name, n in sorted(tasks.items(), key=lambda t: (-t[1], t[0])):
    g = min(groups, key=lambda g: g[0])
    g[0] += n
    g[1].append(name)
print("^(" + "|".join(sorted(groups[part - 1][1])) + ")$")
PY
)
echo "part $part of $parts: $regex"
out="$w/part-$part"
rm -rf "$out"
s=$SECONDS
timeout -s INT "${LIMIT_S:-480}" "$kg" audit checker --protocol all --catalog "$w/catalog" \
  --tasks "$regex" --no-progress --out "$out" >"$logs/part-$part.log" 2>&1
echo "audit: exit $? in $((SECONDS - s)) s"
tail -25 "$logs/part-$part.log"
mkdir -p "$logs/part-$part"
for f in summary.json kill_matrix.json verdicts.jsonl witnesses.jsonl; do
  cp "$out/$f" "$logs/part-$part/" 2>/dev/null || echo "no $f"
done
