#!/usr/bin/env bash
# On the GPU machine: builds, then runs the regression-suite checks of `kernelgate run` (issue:
# the nightly regression suite) with logs under $LOG_DIR. STAGES picks what runs (default all):
#   smoke     two smoke runs back to back (wall time end to end) and compare between them
#   overrides the down GEMV overridden by tests/overrides/gemv_plain.cu and gemv_plus5.cu (its
#             workloads at kernel and step level), compare between them, and gemv_wrong.cu refused
#   resume    ctest -R gpu_suite_run (a run killed with SIGKILL, resumed)
#   engine    the decode engine's GPU tests (ctest -L gpu -R decode|prefill)
#   serving   the production mix's serving workloads on all SMs, their load points
#   nightly   the nightly suite, resumed if $LOG_DIR/nightly exists (NIGHTLY_LIMIT s per call)
set -uo pipefail
BUILD_TARGET=${BUILD_TARGET:-}
source "$(dirname "${BASH_SOURCE[0]}")/gpu_build.sh"
kg="$BUILD_DIR/suite/kernelgate"
stages=${STAGES:-smoke overrides resume}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv >"$logs/gpu_before.csv" 2>&1
runs="$logs/runs" # run folders, packed into runs.tgz at the end (few files come back)
mkdir -p "$runs"
timed() { # NAME CMD...: runs CMD, logs its output and wall seconds
  local name=$1; shift
  local t0=$SECONDS
  "$@" >"$logs/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc in $((SECONDS - t0)) s" | tee -a "$logs/summary.txt"
  return 0
}
for s in $stages; do
  case $s in
  smoke)
    timed smoke1 "$kg" run --suite smoke --out "$runs/smoke1"
    timed smoke2 "$kg" run --suite smoke --out "$runs/smoke2"
    timed smoke_compare "$kg" compare "$runs/smoke1" "$runs/smoke2"
    grep -v '^frame' "$logs/smoke1.log" | cut -c1-300 | tail -25
    tail -3 "$logs/smoke_compare.log"
    ;;
  overrides)
    f='^(kernel\.gemv\.down|step\.decode\.solo)'
    timed override_plain "$kg" run --suite nightly --filter "$f" --out "$runs/ov_plain" \
      --override "gemv.down=$root/tests/overrides/gemv_plain.cu"
    timed override_plus5 "$kg" run --suite nightly --filter "$f" --out "$runs/ov_plus5" \
      --override "gemv.down=$root/tests/overrides/gemv_plus5.cu"
    timed override_compare "$kg" compare "$runs/ov_plain" "$runs/ov_plus5"
    timed override_plain_again "$kg" run --suite nightly --filter "$f" --out "$runs/ov_plain2" \
      --override "gemv.down=$root/tests/overrides/gemv_plain.cu"
    timed override_compare_same "$kg" compare "$runs/ov_plain" "$runs/ov_plain2"
    timed override_wrong "$kg" run --suite smoke --out "$runs/ov_wrong" \
      --override "gemv.down=$root/tests/overrides/gemv_wrong.cu"
    ;;
  resume)
    timed ctest_suite_run ctest -R gpu_suite_run -V --timeout 400
    ;;
  engine)
    # The engine's GPU tests: kernels, prefill attention, engine (chunked prefill, cuBLAS batches)
    timed ctest_engine ctest -L gpu -R "${ENGINE_TESTS:-decode|prefill}" -V --timeout 400
    grep -E 'tests passed|tests failed|\(Failed\)|Failure|Expected|Which is|rel_l2|row ' \
      "$logs/ctest_engine.log" | head -40
    ;;
  serving)
    # The production mix's serving workloads on all SMs (real chunked prefill, the KV pool).
    timed serving "$kg" run --suite nightly --filter "${SERVING_FILTER:-^serving\..*\.production\..*\.solo}" \
      --out "$runs/serving" --no-progress
    grep -v '^frame' "$logs/serving.log" | cut -c1-300 | tail -20
    python3 - "$runs/serving/records.jsonl" <<'PY' | tee "$logs/serving_points.txt"
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    x = r.get("extra", {})
    print(r["id"], "estimate", r.get("estimate"), "ci95", r.get("ci95"), "gates", json.dumps(r.get("gates")))
    print("  prefill", json.dumps(x.get("prefill")), "engine", json.dumps(x.get("engine")))
    print("  search", json.dumps(x.get("search")))
    for p in x.get("load_points", []) + x.get("repeats", []):
        print("   ", json.dumps(p))
PY
    ;;
  nightly)
    # The run folder stays on the machine between calls (build-gpu's sibling) for --resume.
    nd="$root/nightly-${NIGHTLY_NAME:-1}"
    done_status=$(python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['summary']['status'])" "$nd/result.json" 2>/dev/null)
    if [ -f "$nd/run_identity.json" ] && [ "$done_status" != complete ]; then
      timed nightly_resume timeout "${NIGHTLY_LIMIT:-560}" "$kg" run --suite nightly --resume "$nd"
    elif [ ! -f "$nd/run_identity.json" ]; then
      timed nightly timeout "${NIGHTLY_LIMIT:-560}" "$kg" run --suite nightly --out "$nd"
    fi
    grep -v '^frame' "$logs"/nightly*.log | cut -c1-250 | tail -60
    cp -r "$nd" "$runs/"
    ;;
  esac
done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw \
  --format=csv >"$logs/gpu_after.csv" 2>&1
tar czf "$logs/runs.tgz" -C "$logs" runs && rm -rf "$runs"
cat "$logs/summary.txt"
