#!/usr/bin/env bash
# One-shot verification on a GPU machine that has no package registry (the shared H200): unpacks
# Debian packages carried in .deps/debs (nlohmann/json, Eigen, Boost headers) into a private
# prefix, builds with the PyTorch-bundled LibTorch, runs every test (GPU tests included), both
# audits and the benchmarks, and writes logs to $LOG_DIR (default ./gpu-logs).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
logs=${LOG_DIR:-$root/gpu-logs}
mkdir -p "$logs"
prefix=/tmp/kg-deps
if ls "$root"/.deps/debs/*.deb >/dev/null 2>&1; then
  mkdir -p $prefix
  for d in "$root"/.deps/debs/*.deb; do dpkg -x "$d" $prefix; done
fi
export KG_PREFIX_PATH=$prefix/usr
export BUILD_DIR=${BUILD_DIR:-$root/build-gpu}
{
  echo "== nvidia-smi"; nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,driver_version --format=csv
  echo "== compilers"; g++ --version | head -1; nvcc --version | tail -1; cmake --version | head -1
  echo "== build"; time bash "$root/scripts/setup.sh" build
} >"$logs/build.log" 2>&1
tail -5 "$logs/build.log"
cd "$BUILD_DIR" || exit 1
(ctest --output-on-failure -j 8 2>&1) >"$logs/ctest_all.log"; tail -4 "$logs/ctest_all.log"
(ctest -L gpu -V 2>&1) >"$logs/ctest_gpu.log"; grep -E 'tests passed|Test +#|SKIPPED' "$logs/ctest_gpu.log" | head -20
for b in cuda cpu; do
  (time ./suite/kernelgate audit layernorm-affine --backend $b --out "$BUILD_DIR/audit-$b") \
    >"$logs/audit_$b.txt" 2>&1
  echo "audit $b exit $?"
done
cp "$BUILD_DIR/audit-cuda/result.json" "$logs/result_cuda.json"
./suite/kernelgate env --json >"$logs/env.json" 2>&1
./suite/kernelgate validate "$logs/result_cuda.json"
for b in bm_full_cpu_audit bm_torch_reference bm_oracle bm_sol_checker bm_sha256; do
  ./bench/kg_bench_audit --benchmark_filter=$b >>"$logs/bench.txt" 2>&1 || echo "bench $b exit $?"
done
./bench/kg_bench_stats >>"$logs/bench.txt" 2>&1 || echo "bench stats exit $?"
cat "$logs/audit_cuda.txt"
