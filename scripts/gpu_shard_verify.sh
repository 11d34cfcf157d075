#!/usr/bin/env bash
# On the GPU machine (issue: beyond one GPU): builds kernelgate, runs the smoke suite unsharded
# and as `--gpus 0` (one shard on the one GPU, then the merge), and checks that both recorded the
# same workloads in the same order; then compares them. Logs go to $LOG_DIR.
set -uo pipefail
BUILD_TARGET=kernelgate source "$(dirname "${BASH_SOURCE[0]}")/gpu_build.sh" || exit 1
kg="$BUILD_DIR/suite/kernelgate"
w="$root/shard-run"
rm -rf "$w" && mkdir -p "$w"
cd "$root"
s=$SECONDS
"$kg" run --suite smoke --out "$w/whole" --no-progress >"$logs/smoke-whole.log" 2>&1
echo "smoke unsharded: exit $? in $((SECONDS - s)) s"
s=$SECONDS
"$kg" run --suite smoke --gpus 0 --out "$w/gpus0" >"$logs/smoke-gpus0.log" 2>&1
echo "smoke --gpus 0: exit $? in $((SECONDS - s)) s"
tail -4 "$logs/smoke-gpus0.log"
python3 - "$w" <<'PY'
import json, sys
w = sys.argv[1]
a = json.load(open(w + "/whole/result.json"))
b = json.load(open(w + "/gpus0/result.json"))
ia = [r["id"] for r in a["records"]]
ib = [r["id"] for r in b["records"]]
print("unsharded:", len(ia), "workloads, status", a["summary"]["status"])
print("--gpus 0: ", len(ib), "workloads, status", b["summary"]["status"], "missing",
      len(b["summary"]["missing"]), "shards", [(s["index"], s["state"]) for s in b["config"]["shards"]])
print("same workload set and order:", ia == ib)
print("shard wall", b["summary"]["wall_seconds"], "s; unsharded wall", a["summary"]["wall_seconds"], "s")
PY
"$kg" compare "$w/whole" "$w/gpus0" >"$logs/compare.log" 2>&1
echo "compare: exit $?"
tail -1 "$logs/compare.log"
cp "$w/gpus0/result.json" "$logs/gpus0-result.json"
