#!/usr/bin/env bash
# Timing verification on the GPU machine: builds (as gpu_verify.sh does), runs the GPU tests, the
# side-by-side repeatability table, triton's own do_bench on the same ops, and ncu's kernel
# durations (--clock-control none: clocks are never touched). Logs go to $LOG_DIR.
set -uo pipefail
source "$(dirname "$0")/gpu_build.sh"
timeout 200 ctest -L gpu -V >"$logs/ctest_gpu.log" 2>&1
grep -E 'tests passed|measured / expected|time ratio|vs layernorm|cupti|events:|\*\*\*|Failed|FAILED' "$logs/ctest_gpu.log"
echo "ctest: ${SECONDS}s"
timeout 60 ./suite/kernelgate time --impl layernorm-omit_bias --vs layernorm --out /tmp/kg-time \
  >"$logs/time_cmd.txt" 2>&1; cat "$logs/time_cmd.txt"
timeout ${BENCH_TIMEOUT:-280} ./bench/kg_bench_repeatability >"$logs/repeatability.txt" 2>&1; cat "$logs/repeatability.txt"
echo "bench: ${SECONDS}s"
timeout 60 ./bench/kg_bench_repeatability --child host >"$logs/host.txt" 2>&1; cat "$logs/host.txt"
timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum --csv \
  ./bench/kg_bench_repeatability --child ncu >"$logs/ncu.csv" 2>"$logs/ncu.err"
python3 - "$logs/ncu.csv" <<'PY'
import csv, statistics, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]; k = head.index("Kernel Name"); v = head.index("Metric Value"); u = head.index("Metric Unit")
d = collections.defaultdict(list)
for r in rows[1:]:
    scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}.get(r[u], float("nan"))
    d[r[k].split("(")[0].split("<")[0]].append(float(r[v].replace(",", "")) * scale)
for name, xs in d.items():
    if len(xs) <= 3: continue  # set-up kernels (fills), not the timed ops
    print("ncu %-28s median %.2f us over %d launches" % (name, statistics.median(xs[3:]), len(xs) - 3))
PY
[ -n "${SKIP_PEER:-}" ] || {
timeout 150 python3 "$root/scripts/dobench_peer.py" 8 >"$logs/dobench_peer.txt" 2>&1
cat "$logs/dobench_peer.txt"
}
echo "total: ${SECONDS}s"
