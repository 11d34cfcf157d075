#!/usr/bin/env bash
# On the GPU machine, for issue 24: which kernels cuBLAS runs for the decode projections
# (scripts/cublas_kernels.py: names, grids, kernel times at batch 1-128), then Nsight Compute's
# sections of ours (the pick table's configuration, through kg_bench_gemv_sweep with no other
# family) and of cuBLAS's (torch's F.linear) at the points PROBES (PROJECTION:BATCH ...), side by
# side: where each spends its time. Reads counters only: --clock-control none, since ncu by
# default locks the SM clock to base while it profiles, and this machine is shared.
# Logs into $LOG_DIR (default gpu-logs): build.log, cublas.txt/json, ncu-{ours,cublas}-P-bB.txt.
set -uo pipefail
BUILD_TARGET=kg_bench_gemv_sweep source "$(dirname "${BASH_SOURCE[0]}")/gpu_build.sh" || exit 1
python3 "$root/scripts/cublas_kernels.py" --json "$logs/cublas.json" >"$logs/cublas.txt" 2>&1
echo "cublas_kernels: exit $?"
cut -c1-240 "$logs/cublas.txt"
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$ncu" ] || { echo "no ncu on this machine: the sections are not measured"; exit 0; }
sections=(--clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats
  --section LaunchStats --section Occupancy --section SchedulerStats)
for p in ${PROBES:-qkv:32 o_proj:128 down:64}; do
  proj=${p%:*} b=${p#*:}
  # ours: the table's row only (--kinds none), its check launch and one more skipped
  timeout 120 "$ncu" "${sections[@]}" --kernel-name regex:gemv --launch-skip 2 --launch-count 1 \
    ./bench/kg_bench_gemv_sweep --shapes "$proj" --batches "$b" --kinds none --no-ceiling \
    --no-cublas --backend events >"$logs/ncu-ours-$proj-b$b.txt" 2>&1
  echo "ncu ours $p: exit $?"
  timeout 120 "$ncu" "${sections[@]}" --launch-skip 1 --launch-count 1 \
    python3 "$root/scripts/cublas_kernels.py" --only "$p" >"$logs/ncu-cublas-$proj-b$b.txt" 2>&1
  echo "ncu cublas $p: exit $?"
  grep -hE "^  [a-z_]|Duration|DRAM Throughput|Memory Throughput|Registers Per|Grid Size|Block Size|Achieved Occupancy|Dynamic Shared" \
    "$logs/ncu-ours-$proj-b$b.txt" "$logs/ncu-cublas-$proj-b$b.txt" | cut -c1-160 | head -40
done
# (one archive: the device call brings back a few files only)
tar czf "$logs/ncu.tgz" -C "$logs" $(cd "$logs" && ls ncu-*.txt) && rm -f "$logs"/ncu-*.txt
