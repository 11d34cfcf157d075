#!/usr/bin/env bash
# On the GPU machine, within one device call: builds kernelgate and the GPU tests, runs the GPU
# tests matching GPU_TESTS (output of failures shown), then audits the mutants of KERNELS (a
# space-separated list of kernel files) with --protocol all for at most PROBE_S seconds, and
# prints the audit's summary, the phase sums and per task where the candidates' seconds went.
# A short probe of the audit's speed on chosen tasks (the whole catalog: gpu_audit_verify.sh).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
logs=${LOG_DIR:-$root/gpu-logs}
BUILD_TARGET="kernelgate kg_gpu_tests" source "$root/scripts/gpu_build.sh" || exit 1
kg="$BUILD_DIR/suite/kernelgate"
w="$root/audit-run"
rm -rf "$w" && mkdir -p "$w"
if [ -n "${GPU_TESTS:-}" ]; then
  s=$SECONDS
  ctest -L gpu -R "$GPU_TESTS" --output-on-failure --timeout 400 >"$logs/tests.log" 2>&1
  echo "tests: exit $? in $((SECONDS - s)) s"
  grep -E "tests passed|tests failed|\(Failed\)|Failure|Expected|Which is|^  Actual|rejected|^kernelgate:|every correct|escape" \
    "$logs/tests.log" | head -40
fi
[ -n "${KERNELS:-}" ] || exit 0
cd "$root"
"$kg" mutants generate $(for k in $KERNELS; do echo --kernels "$k"; done) --out "$w/catalog" |
  tail -1
s=$SECONDS
KG_PHASE_LOG="$w/phases.log" timeout "${PROBE_S:-200}" "$kg" audit checker --protocol all \
  --catalog "$w/catalog" --no-progress --out "$w/audit" >"$logs/audit.log" 2>&1
echo "audit: exit $? in $((SECONDS - s)) s"
grep -E "^(compile|witness|every|.*rejected a correct)" "$logs/audit.log"
awk '{n[$2]++; t[$2]+=$3; if ($3>m[$2]) m[$2]=$3}
  END {for (k in t) printf "phase %-26s %6d %9.1f s  max %6.2f s\n", k, n[k], t[k], m[k]}' \
  "$w/phases.log" | sort -k4 -n -r | head -16
python3 - "$w/audit/verdicts.jsonl" <<'PY'
import json, sys, collections
t = collections.OrderedDict()
for line in open(sys.argv[1]):
    v = json.loads(line)
    a = t.setdefault(v["task"], [0, 0.0, 0.0, 0.0, 0, 0, 0])
    for i, k in enumerate(["seconds", "run_seconds", "judge_seconds"]):
        a[i + 1] += v.get(k, 0)
    a[0] += 1; a[4] += v.get("trials_sent", 0); a[5] += v["crashes"]; a[6] += v["hangs"]
for k, a in t.items():
    print("task %-24s %4d cand %7.1f s (run %7.1f judge %6.1f) %6d trials %4d crashes %3d hangs"
          % (k, *a))
PY
cp "$w/audit/verdicts.jsonl" "$logs/" 2>/dev/null
