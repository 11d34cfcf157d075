#!/usr/bin/env bash
# No behaviour change between two builds of kernelgate: runs both on the CPU audit, on fast_p over
# KernelBench-format fixtures (KernelBench's two golden vectors and a four-task example) and on
# `protocols`, and compares what they print and write, byte for byte, after dropping what differs
# by nature: timestamps, wall times, the environment block, the command line and the output
# folder's name.
#   scripts/compare_outputs.sh OLD_KERNELGATE NEW_KERNELGATE
# Prints one line a comparison; exit 0 when all are identical.
set -uo pipefail
old=$(realpath "$1") new=$(realpath "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$work" <<'PY'
import json, sys
d = sys.argv[1]
def ev(rows, f):
    json.dump({str(i): [{"sample_id": 0, "compiled": True, "correctness": c, "metadata": {},
                         "runtime": r, "runtime_stats": {}}] for i, c, r in rows}, open(f"{d}/{f}", "w"))
def bl(rows, f):
    json.dump({"level1": {f"{i}_P{i}.py": {"mean": m, "std": 0.01, "min": m, "max": m,
                                           "num_trials": 100, "hardware": "NVIDIA H200",
                                           "device": "cuda:0"} for i, m in rows}}, open(f"{d}/{f}", "w"))
ev([(1, True, 0.2), (2, False, 0.15), (3, True, 0.3), (4, True, 0.01), (5, False, 0.2)], "g1_eval.json")
bl([(1, 0.1), (2, 0.15), (3, 0.2), (4, 0.05), (5, 0.3)], "g1_base.json")
ev([(1, True, 0.3), (2, True, 0.3), (3, True, 200.0), (4, True, 0.0001), (5, False, 0.3)], "g2_eval.json")
bl([(1, 0.24), (2, 0.31), (3, 100.0), (4, 0.0001), (5, 0.3)], "g2_base.json")
ev([(1, True, 1.0), (2, True, 1.0), (3, False, -1.0)], "t4_eval.json")
bl([(1, 1.5), (2, 1.0), (3, 1.0), (4, 1.0)], "t4_base.json")
PY
# strip FILE: the JSON (or JSON lines) without timestamps, environment, argv and paths of the run.
strip() {
  python3 - "$1" "$work" <<'PY'
import json, sys
f, work = sys.argv[1], sys.argv[2]
drop = {"created", "started", "finished", "environment", "argv", "timestamp", "wall_seconds", "seconds",
        "elapsed_seconds", "out"}
def clean(x):
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items() if k not in drop}
    if isinstance(x, list):
        return [clean(v) for v in x]
    if isinstance(x, str):
        return x.replace(work, "WORK").replace("/old/", "/RUN/").replace("/new/", "/RUN/")
    return x
text = open(f).read()
try:
    docs = [json.loads(text)]
except json.JSONDecodeError:
    docs = [json.loads(l) for l in text.splitlines() if l.strip()]
for d in docs:
    print(json.dumps(clean(d), sort_keys=True))
PY
}
status=0
same() { # same NAME FILE_OLD FILE_NEW
  if cmp -s "$2" "$3"; then echo "identical: $1"; else echo "DIFFERENT: $1"; diff "$2" "$3" | cut -c1-300 | head -6; status=1; fi
}
for side in old new; do
  bin=${!side}
  mkdir -p "$work/$side"
  (cd "$work" &&
   "$bin" audit layernorm-affine --backend cpu --out "$work/$side/audit" >"$work/$side/audit.txt" 2>&1
   "$bin" protocols --json >"$work/$side/protocols.json"
   "$bin" protocols >"$work/$side/protocols.txt"
   for f in g1 g2 t4; do
     "$bin" fastp "$work/${f}_eval.json" --baseline "$work/${f}_base.json" >"$work/$side/fastp_$f.txt" 2>&1
     "$bin" fastp "$work/${f}_eval.json" --baseline "$work/${f}_base.json" --json >"$work/$side/fastp_$f.json" 2>&1
     "$bin" fastp "$work/${f}_eval.json" --baseline "$work/${f}_base.json" --p 1 --out "$work/$side/fastp_out_$f" >/dev/null 2>&1
   done)
  # (paths of the run, and the wall time audit prints last)
  sed -i -E "s|$work/$side|WORK/RUN|g; s|$work|WORK|g; s|records\) in [0-9.]+ s|records) in T s|" "$work/$side"/*.txt
  strip "$work/$side/audit/records.jsonl" >"$work/$side/audit_records.norm"
  strip "$work/$side/audit/result.json" >"$work/$side/audit_result.norm"
  for f in g1 g2 t4; do strip "$work/$side/fastp_out_$f/result.json" >"$work/$side/fastp_result_$f.norm"; done
done
for f in audit.txt audit_records.norm audit_result.norm protocols.json protocols.txt \
         fastp_g1.txt fastp_g2.txt fastp_t4.txt fastp_g1.json fastp_g2.json fastp_t4.json \
         fastp_result_g1.norm fastp_result_g2.norm fastp_result_t4.norm; do
  same "$f ($(wc -c <"$work/new/$f") bytes)" "$work/old/$f" "$work/new/$f"
done
exit $status
