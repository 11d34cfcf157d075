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
python3 "$root/scripts/audit_seconds.py" "$w/phases.log" "$w/audit/verdicts.jsonl"
cp "$w/audit/verdicts.jsonl" "$logs/" 2>/dev/null
