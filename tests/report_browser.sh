#!/usr/bin/env bash
# `kernelgate report` end to end in headless Chromium: a report of each kind (a suite run against
# a baseline, a compare result, an eval with its fastp result, a CPU audit) is rendered from small
# fixtures, loaded, and checked by report_browser_check.py (no console message, no network
# request from the page, every id of the result in the DOM, non-empty SVG plots, a screenshot of
# non-trivial size). The checker is first shown to catch a planted request and console error.
# Bad input must exit 2 with one line. Without Chromium the test says so and exits 77 (ctest
# SKIP_RETURN_CODE): a skip, never a silent pass.
# Usage: report_browser.sh KERNELGATE FIXTURES_DIR SCRATCH_PARENT (the build tree)
set -u
kg=$1 fixtures=$2 parent=$3
here=$(cd "${0%/*}" && pwd)
chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium" ]; then
  echo "SKIPPED: no chromium on PATH (scripts/setup.sh test installs Debian chromium)"
  exit 77
fi
work=$(mktemp -d "$parent/report_browser.XXXXXX") && work=$(cd "$work" && pwd) # file:// wants it absolute
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

# Chromium with everything that phones home switched off; its own remaining service requests are
# told apart from the page's by their initiator (report_browser_check.py).
browse() { # browse PAGE NAME: NAME.dom, NAME.err, NAME.netlog.json, NAME.png under $work
  local page=$1 name=$2 flags
  flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
    --disable-background-networking --disable-component-update --disable-sync
    --disable-default-apps --disable-extensions --no-pings --disable-domain-reliability
    --disable-client-side-phishing-detection --disable-breakpad --metrics-recording-only
    --disable-features=NetworkTimeServiceQuerying,OptimizationHints,Translate,MediaRouter
    --hide-scrollbars)
  timeout 120 "$chromium" "${flags[@]}" --user-data-dir="$work/profile-$name-dom" \
    --enable-logging=stderr --v=0 --log-net-log="$work/$name.netlog.json" \
    --net-log-capture-mode=Everything --dump-dom "file://$page" >"$work/$name.dom" \
    2>"$work/$name.err" || fail "$name: chromium --dump-dom exited $?"
  timeout 120 "$chromium" "${flags[@]}" --user-data-dir="$work/profile-$name-png" \
    --screenshot="$work/$name.png" --window-size=1280,1600 "file://$page" \
    >/dev/null 2>>"$work/$name.shot.err" || fail "$name: chromium --screenshot exited $?"
}

check() { # check NAME MIN_SVGS [MIN_PNG_BYTES]
  echo "$1:"
  python3 "$here/report_browser_check.py" --dom "$work/$1.dom" --stderr "$work/$1.err" \
    --netlog "$work/$1.netlog.json" --png "$work/$1.png" --ids "$work/$1.ids" \
    --min-svgs "$2" --min-png-bytes "${3:-20000}" || fail "$1"
}

ids() { # ids NAME PYTHON_EXPR FILE...: one id a line from each result (json d)
  local name=$1 expr=$2
  shift 2
  python3 -c '
import json, sys
expr = sys.argv[1]
for f in sys.argv[2:]:
    d = json.load(open(f))
    for i in eval(expr):
        print(i)' "$expr" "$@" >"$work/$name.ids"
}

# The checker itself: a page with a request and a console error must fail.
printf '%s\n' '<!DOCTYPE html><html><body><p>planted</p>' \
  '<img src="http://127.0.0.1:9/planted.png"><script>console.error("planted")</script>' \
  '<svg><line x1="0" y1="0" x2="1" y2="1"/></svg></body></html>' >"$work/planted.html"
browse "$work/planted.html" planted
echo planted >"$work/planted.ids"
if python3 "$here/report_browser_check.py" --dom "$work/planted.dom" --stderr "$work/planted.err" \
  --netlog "$work/planted.netlog.json" --png "$work/planted.png" --ids "$work/planted.ids" \
  --min-svgs 1 --min-png-bytes 1 >"$work/planted.out"; then
  fail "the checker passed a page with a planted request and console error"
else
  grep -q "network request: http://127.0.0.1:9/planted.png" "$work/planted.out" ||
    fail "the checker missed the planted request"
  grep -q "console:" "$work/planted.out" || fail "the checker missed the planted console error"
fi

# Inputs: a suite run and its baseline (committed, small), their compare result, an eval
# (committed) and its fastp result, a CPU audit.
base=$fixtures/suite_base.json new=$fixtures/suite_new.json eval=$fixtures/eval_result.json
"$kg" compare "$base" "$new" --out "$work/compare" >/dev/null
[ -s "$work/compare/result.json" ] || fail "compare wrote no result"
"$kg" fastp "$eval" --out "$work/fastp" >/dev/null || fail "fastp exited $?"
"$kg" audit layernorm-affine --backend cpu --out "$work/audit" >/dev/null || fail "audit exited $?"
# A checker audit (`audit checker --cmd`, no GPU) of one small kernel's mutants: a checker that
# only looks for the kernel's formula in the source, every third mutant unwitnessed.
mkdir -p "$work/ck/k" "$work/ck/data/tasks"
printf '%s\n' '__global__ void twice(const float* x, float* y, int n) {' \
  '  int i = blockIdx.x * blockDim.x + threadIdx.x;' '  if (i < n) y[i] = x[i] * 2.0f;' '}' \
  >"$work/ck/k/twice.cu"
echo '{"id": "twice"}' >"$work/ck/data/tasks/twice.json"
"$kg" mutants generate --root "$work/ck" --kernels 'k/*.cu' --out "$work/ck/catalog" >/dev/null ||
  fail "mutants generate exited $?"
python3 -c '
import json, sys
with open(sys.argv[2], "w") as w:
    for i, line in enumerate(open(sys.argv[1])):
        w.write(json.dumps({"id": json.loads(line)["id"],
                            "status": "unwitnessed" if i % 3 == 0 else "witnessed"}) + "\n")' \
  "$work/ck/catalog/catalog.jsonl" "$work/ck/witnesses.jsonl"
"$kg" audit checker --cmd "grep -q 'x\[i\] \* 2.0f' {candidate}" --catalog "$work/ck/catalog" \
  --witnesses "$work/ck/witnesses.jsonl" --root "$work/ck" --tasks-dir "$work/ck/data/tasks" \
  --out "$work/ck/out" >/dev/null || fail "audit checker exited $?"

render() { # render NAME ARGS...
  local name=$1
  shift
  "$kg" report "$@" --html "$work/$name.html" >/dev/null 2>"$work/$name.report.err" ||
    fail "$name: report exited $?: $(head -c 300 "$work/$name.report.err")"
}
# The history (reports/run_history.h): BASE then NEW appended, trend lines drawn from it.
"$kg" history "$work/history.sqlite" --append "$base" >/dev/null || fail "history --append BASE"
"$kg" history "$work/history.sqlite" --append "$new" >/dev/null || fail "history --append NEW"
render suite "$new" --baseline "$base" --history "$work/history.sqlite"
render compare "$work/compare"
render eval "$eval" "$work/fastp"
render audit "$work/audit"
render checker "$work/ck/out"

ids suite '[r["id"] for r in d["records"]]' "$base" "$new"
ids compare '[r["workload"] for r in d["records"]]' "$work/compare/result.json"
ids eval '[r["task"] for r in d["records"] if "task" in r] + d["config"].get("intended_tasks", []) + [x["task"] for c in d["summary"].get("candidates", []) for x in c["exclusions"] + c["missing"]]' \
  "$eval" "$work/fastp/result.json"
ids audit 'list(d["summary"]["matrix"]) + sorted({p for r in d["summary"]["presets"].values() for p in r})' \
  "$work/audit/result.json"
ids checker '[e["id"] for e in d["escapes"]] + list(d["families"])' "$work/ck/out/summary.json"

# Plots each page must draw: suite: forest, p99 strip, throughput search, a trend per workload
# (7); compare: forest; eval: speedups, fast_p curve; audit: two kill-matrix heat maps; checker
# audit: its heat map.
for spec in suite:10 compare:1 eval:2 audit:2 checker:1; do
  name=${spec%%:*}
  [ -s "$work/$name.html" ] || continue
  browse "$work/$name.html" "$name"
  check "$name" "${spec##*:}"
done

# Bad input: exit 2 and one line naming the problem; no page written.
printf '{"kind": ' >"$work/malformed.json"
printf '{"schema": "kernelgate.result/1", "kind": "time", "records": []}' >"$work/time.json"
bad_input() { # bad_input WHAT EXPECTED_TEXT ARGS...
  local what=$1 expect=$2
  shift 2
  "$kg" report "$@" >"$work/bad.out" 2>"$work/bad.err"
  local rc=$?
  [ "$rc" = 2 ] || fail "$what: exit $rc, expected 2"
  [ "$(wc -l <"$work/bad.err")" = 1 ] || fail "$what: not one line: $(cat "$work/bad.err")"
  grep -qF -- "$expect" "$work/bad.err" || fail "$what: '$expect' not in: $(cat "$work/bad.err")"
}
bad_input "malformed JSON" "malformed.json" "$work/malformed.json" --html "$work/x.html"
bad_input "unknown kind" "kind 'time'" "$work/time.json" --html "$work/x.html"
bad_input "missing file" "no_such.json" "$work/no_such.json" --html "$work/x.html"
bad_input "unwritable --html" "cannot write" "$eval" --html "$work/no_such_dir/x.html"
bad_input "baseline not a suite run" "--baseline" "$new" --baseline "$eval" --html "$work/x.html"
bad_input "history missing" "no_such.sqlite" "$new" --history "$work/no_such.sqlite" --html "$work/x.html"
[ -e "$work/x.html" ] && fail "a page was written despite bad input"

if [ "$failures" -ne 0 ]; then
  echo "report_browser: $failures failures"
  exit 1
fi
echo "report_browser: every report loads cleanly in $("$chromium" --version 2>/dev/null | head -1)"
