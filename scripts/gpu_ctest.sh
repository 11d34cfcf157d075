#!/usr/bin/env bash
# Every GPU test on the GPU machine: builds everything (as gpu_build.sh does), then `ctest -L gpu`
# with the honest-kernel regression cut to $RUNS runs (default 1; run it at full length with
# gpu_red_team_verify.sh). Logs go to $LOG_DIR (default gpu-logs).
set -uo pipefail
unset BUILD_TARGET
source "$(dirname "$0")/gpu_build.sh"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,driver_version --format=csv \
  >"$logs/nvidia_smi.csv" 2>&1
t0=$SECONDS
KG_REGRESSION_RUNS=${RUNS:-1} timeout "${CTEST_TIMEOUT:-480}" ctest -L gpu -V \
  >"$logs/ctest_gpu.log" 2>&1
echo "ctest -L gpu: exit $? in $((SECONDS - t0)) s"
grep -E 'tests passed|tests failed|Test +#|\(Failed\)|SKIPPED|GPU test skipped' "$logs/ctest_gpu.log" | head -60
# The CUDA audit's table (gpu_layernorm.cuda_audit_reproduces_the_target_table checks it).
./suite/kernelgate audit layernorm-affine --backend cuda --out "$logs/audit-cuda" >"$logs/audit_cuda.txt" 2>&1
echo "audit cuda: exit $?"
head -16 "$logs/audit_cuda.txt"
echo "total: ${SECONDS}s"
