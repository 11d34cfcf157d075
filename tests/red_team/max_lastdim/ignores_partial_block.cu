// Red team (a wrong kernel, no cheat): one warp per row, reading the row in full 32-element
// blocks -- and forgetting the remainder: only the first floor(C / 32) * 32 columns are reduced.
// Right when C % 32 == 0 and, for C = 4097, whenever the row's maximum is not its last element
// (under N(0,1) a row's maximum is there with probability 1/4097); tail_extreme puts it there.
#include <cfloat>

#include "kg_candidate.h"

namespace {
constexpr int warps = 8;

__global__ void max_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t rows,
                           int64_t cols) {
  const int lane = threadIdx.x % 32;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * warps + threadIdx.x / 32;
  if (r >= rows) return;
  const float* row = x + r * cols;
  float acc = -FLT_MAX;
  for (int64_t base = 0; base + 32 <= cols; base += 32) // the fault: no tail loop after this
    acc = fmaxf(acc, row[base + lane]);
  for (int o = 16; o > 0; o /= 2)
    acc = fmaxf(acc, __shfl_xor_sync(0xffffffffu, acc, o));
  if (lane == 0) y[r] = acc;
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 1 || n_out != 1 || in[0].dtype != KG_FLOAT32 || out[0].dtype != KG_FLOAT32 ||
      in[0].ndim != 2 || out[0].ndim != 1 || out[0].shape[0] != in[0].shape[0])
    return 1;
  const int64_t rows = in[0].shape[0], cols = in[0].shape[1];
  if (rows == 0) return 0;
  max_kernel<<<static_cast<unsigned>((rows + warps - 1) / warps), 32 * warps, 0, s>>>(
      static_cast<const float*>(in[0].data), static_cast<float*>(out[0].data), rows, cols);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
