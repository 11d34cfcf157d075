#!/usr/bin/env bash
# Timing verification on the GPU machine: builds (as gpu_verify.sh does), runs the GPU tests, the
# side-by-side repeatability table, triton's own do_bench on the same ops, and ncu's kernel
# durations (--clock-control none: clocks are never touched) beside kernelgate's counters backend
# (the same metric, gpu__time_duration.sum). Logs go to $LOG_DIR.
set -uo pipefail
source "$(dirname "$0")/gpu_build.sh"
# SKIP_CTEST=1: the benchmarks only (the GPU tests run in a call of their own).
[ -n "${SKIP_CTEST:-}" ] || {
timeout 200 ctest -L gpu -V >"$logs/ctest_gpu.log" 2>&1
grep -E 'tests passed|measured / expected|time ratio|vs layernorm|cupti|counters|events:|\*\*\*|Failed|FAILED' "$logs/ctest_gpu.log"
echo "ctest: ${SECONDS}s"
}
timeout 60 ./suite/kernelgate time --impl layernorm-omit_bias --vs layernorm --out /tmp/kg-time \
  >"$logs/time_cmd.txt" 2>&1; cat "$logs/time_cmd.txt"
timeout ${BENCH_TIMEOUT:-480} ./bench/kg_bench_repeatability >"$logs/repeatability.txt" 2>&1; cat "$logs/repeatability.txt"
echo "bench: ${SECONDS}s"
timeout 60 ./bench/kg_bench_repeatability --child host >"$logs/host.txt" 2>&1; cat "$logs/host.txt"
timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum --csv \
  ./bench/kg_bench_repeatability --child ncu >"$logs/ncu.csv" 2>"$logs/ncu.err"
python3 - "$logs/ncu.csv" "$logs/repeatability.txt" <<'PY'
import csv, statistics, sys, collections
lines = open(sys.argv[1]).read().splitlines()
# The bench's ncu child names each op's kernel ("kg-op OP KERNEL"); the repeatability table ends
# with kernelgate's counters-backend median per op ("kgN-median OP US").
kernel_op = {l.split()[2]: l.split()[1] for l in lines if l.startswith("kg-op ")}
kgn = {}
for l in open(sys.argv[2]):
    if l.startswith("kgN-median "):
        kgn[l.split()[1]] = float(l.split()[2])
rows = [r for r in csv.reader(lines) if len(r) > 10]
head = rows[0]; k = head.index("Kernel Name"); v = head.index("Metric Value"); u = head.index("Metric Unit")
d = collections.defaultdict(list)
for r in rows[1:]:
    scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}.get(r[u], float("nan"))
    d[r[k].split("(")[0].split("<")[0]].append(float(r[v].replace(",", "")) * scale)
for name, xs in d.items():
    if len(xs) <= 3: continue  # set-up kernels (fills), not the timed ops
    ncu = statistics.median(xs[3:])
    op = next((o for kern, o in kernel_op.items() if kern in name), None)
    kg = kgn.get(op) if op else None
    beside = ("; kernelgate counters %.2f us (%+.1f%%)" % (kg, 100 * (kg / ncu - 1))
              if kg else "; kernelgate counters: no result")
    print("ncu %-28s median %.2f us over %d launches%s" % (name, ncu, len(xs) - 3, beside))
PY
[ -n "${SKIP_PEER:-}" ] || {
timeout 150 python3 "$root/scripts/dobench_peer.py" 8 >"$logs/dobench_peer.txt" 2>&1
cat "$logs/dobench_peer.txt"
}
echo "total: ${SECONDS}s"
