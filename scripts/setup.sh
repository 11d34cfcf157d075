#!/usr/bin/env bash
# kernelgate set-up on a fresh Debian/Ubuntu machine: installs what is missing, builds, then
#   run   runs the main job: the GPU audit where a GPU is present, the CPU audit otherwise
#   test  runs every test (GPU tests skip with a message where no GPU exists)
#   build only builds
# Re-running is fast: nothing is installed twice and ninja rebuilds only what changed.
# Environment: BUILD_DIR (default build), KG_PREFIX_PATH (extra CMake prefixes, ':'-separated),
#              KG_JOBS (parallel jobs, default nproc).
set -euo pipefail
mode=${1:-run}
case "$mode" in run|test|build) ;; *) echo "usage: $0 run|test|build" >&2; exit 2 ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
jobs=${KG_JOBS:-$(nproc)}

have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'ok installed'; }
sudo_cmd() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# --- dependencies -----------------------------------------------------------------------------
torch_prefix=""
if ! have_pkg libtorch-dev && python3 -c 'import torch' 2>/dev/null; then
  # A machine with PyTorch installed (the GPU machine) uses that LibTorch.
  torch_prefix=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
fi
missing=()
# need PACKAGE CHECK...: install PACKAGE unless CHECK succeeds (found another way: a carried
# prefix, a pip LibTorch, a tool already on PATH) or the package is already installed.
need() { local pkg=$1; shift; "$@" && return 0; have_pkg "$pkg" || missing+=("$pkg"); }
prefix_has() {
  local d
  local p=${KG_PREFIX_PATH:-}
  for d in ${p//:/ } /usr /usr/local; do [ -e "$d/$1" ] && return 0; done
  return 1
}
need cmake command -v cmake >/dev/null
need ninja-build command -v ninja >/dev/null
need g++ command -v g++ >/dev/null
need libgtest-dev prefix_has include/gtest/gtest.h
need libbenchmark-dev prefix_has include/benchmark/benchmark.h
need libboost-math-dev prefix_has include/boost/math/distributions/beta.hpp
need nlohmann-json3-dev prefix_has share/cmake/nlohmann_json/nlohmann_jsonConfig.cmake
need libeigen3-dev prefix_has share/eigen3/cmake/Eigen3Config.cmake
need libssl-dev prefix_has include/openssl/evp.h
need libcli11-dev prefix_has share/cmake/CLI11/CLI11Config.cmake
need libsqlite3-dev prefix_has include/sqlite3.h
need json-schema-test-suite prefix_has share/json-schema-test-suite/tests/draft7/type.json
# The browser test (ctest report.html_in_chromium) loads the HTML reports in headless Chromium.
if [ "$mode" = test ]; then need chromium command -v chromium >/dev/null; fi
# The Slurm test (ctest slurm.local_cluster) starts its own one-node cluster (scripts/local_slurm.sh).
if [ "$mode" = test ]; then
  need slurm-wlm test -x /usr/sbin/slurmctld -a -x /usr/sbin/slurmd
  need munge test -x /usr/sbin/munged
fi
[ -n "$torch_prefix" ] || need libtorch-dev test -f /usr/include/torch/csrc/api/include/torch/torch.h
if [ ${#missing[@]} -gt 0 ]; then
  echo "kernelgate: installing ${missing[*]}"
  sudo_cmd apt-get update -qq
  sudo_cmd env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi
nvcc=${CUDACXX:-}
[ -n "$nvcc" ] || nvcc=$(command -v nvcc || true)
[ -n "$nvcc" ] || { [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc; } || true
if [ -z "$nvcc" ]; then
  echo "kernelgate: the CUDA Toolkit (12.8 or later, for sm_90a) is required: install it to" \
       "/usr/local/cuda or put nvcc on PATH" >&2
  exit 3
fi

# --- build ------------------------------------------------------------------------------------
prefix="${KG_PREFIX_PATH:-}"
[ -n "$torch_prefix" ] && prefix="${prefix:+$prefix;}$torch_prefix"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_COMPILER="$nvcc" ${prefix:+-DCMAKE_PREFIX_PATH="${prefix//:/;}"} >/dev/null
fi
cmake --build "$build" -j "$jobs" ${BUILD_TARGET:+--target $BUILD_TARGET}

# --- run --------------------------------------------------------------------------------------
gpu_present() { command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q GPU; }
case "$mode" in
  build) ;;
  test)
    cd "$build"
    ctest --output-on-failure -j "$jobs"
    # ctest does not print a skipped test's message: show why the GPU tests skipped, if they did.
    ctest -L gpu -R cupti_activity_tracing_works_here -V 2>&1 | grep -m1 -o 'GPU test skipped: .*' || true
    # ... and what the fuzz target ran (its case count and outcome).
    ctest -R '^fuzz.readers$' -V 2>&1 | grep -m1 -o '[0-9]* cases (seed.*' || true ;;
  run)
    "$build/suite/kernelgate" env
    if gpu_present; then backend=cuda; else backend=cpu; fi
    "$build/suite/kernelgate" audit layernorm-affine --backend "$backend" \
      --out "$root/kg-out/audit-layernorm-affine-$backend"
    # The regression smoke gate where a GPU exists (docs/suites.md).
    if gpu_present; then
      "$build/suite/kernelgate" run --suite smoke --out "$root/kg-out/run-smoke"
    fi ;;
esac
