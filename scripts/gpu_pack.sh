#!/usr/bin/env bash
# Here (the CPU machine): builds GPU binaries and packs them for the GPU machine, so a device
# call runs them at once instead of spending some 200 s of its time budget building
# (scripts/gpu_prebuilt.sh runs them there; docs/performance.md, The device time).
#   bash scripts/gpu_pack.sh [TARGET...]   (default: the decode, GEMV and attention GPU tests
#   and benches)
# Writes prebuilt/ (ignored by git; name it in the device call's carry): kg.tar.zst, the
# binaries by their paths in the build folder; zstd, this machine's, to unpack them there; and
# commit, the commit they were built from (with "+dirty" for uncommitted changes). The pack must
# stay under the carry limit (64 MiB with the tree): zstd's long-range mode stores the device
# code the binaries share once. Only binaries that need nothing beyond the CUDA toolkit's and the
# C/C++ runtime's libraries are packed (LibTorch and the CPU machine's packages are not there).
# Exit: 0 packed, 1 a build failed, 2 a binary needs a library the GPU machine lacks or the pack
# is too large.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(kg_decode_gpu_tests kg_gemv_gpu_tests kg_bench_decode_step
  kg_bench_gemv_sweep kg_bench_attention_sweep)
# A fresh clone: set up and configure, building only these targets.
[ -f "$build/build.ninja" ] ||
  BUILD_TARGET="${targets[*]}" bash "$root/scripts/setup.sh" build >/dev/null
ninja -C "$build" "${targets[@]}" >/dev/null || { echo "gpu_pack: the build failed" >&2; exit 1; }
paths=()
for t in "${targets[@]}"; do
  p=$(cd "$build" && find . -type f -name "$t" -perm -u+x | head -1)
  [ -n "$p" ] || { echo "gpu_pack: no binary $t in $build" >&2; exit 1; }
  if ldd "$build/$p" | grep -Eq "libtorch|libc10|not found"; then
    echo "gpu_pack: $t needs a library the GPU machine lacks (LibTorch, or one not found here)" >&2
    exit 2
  fi
  paths+=("${p#./}")
done
out=$root/prebuilt
rm -rf "$out" && mkdir -p "$out"
tar cf - -C "$build" "${paths[@]}" | zstd -19 --long=29 -T0 -q -c >"$out/kg.tar.zst"
cp "$(command -v zstd)" "$out/zstd"
c=$(git -C "$root" rev-parse --short HEAD)
git -C "$root" diff --quiet HEAD -- . ':!prebuilt' || c="$c+dirty"
echo "$c" >"$out/commit"
bytes=$(du -cb "$out" | tail -1 | cut -f1)
echo "prebuilt/: ${paths[*]} from $c, $((bytes / 1048576)) MiB"
[ "$bytes" -lt $((56 * 1048576)) ] || { echo "gpu_pack: too large to carry with the tree" >&2; exit 2; }
