// Red team (nondeterministic, no cheat): a row sum whose result depends on timing, standing in
// for a data race. Each block reads the SM clock once (clock64) and, on an unlucky reading,
// drops the row's first element from its sum. The odds per row are set so that about half of the
// calls have one wrong row, whatever the number of rows; which rows, and whether any, change from
// one identical call to the next. A dropped element moves the sum by |x[0]| (~0.8 under N(0,1),
// against atol 3e-3).
#include <cmath>

#include "kg_candidate.h"

namespace {
constexpr int threads = 256;

__device__ __forceinline__ uint64_t mix(uint64_t z) { // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__global__ void sum_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols,
                           uint32_t drop_below) {
  __shared__ float partial[threads / 32];
  __shared__ bool drop;
  if (threadIdx.x == 0) {
    const uint64_t t = static_cast<uint64_t>(clock64()); // once per block
    drop = static_cast<uint32_t>(mix(t ^ (blockIdx.x * 0x9e3779b97f4a7c15ull)) >> 32) < drop_below;
  }
  __syncthreads();
  const float* row = x + blockIdx.x * cols;
  float acc = 0.0f;
  for (int64_t c = (drop && threadIdx.x == 0) ? threads : threadIdx.x; c < cols; c += threads)
    acc += row[c]; // an unlucky block never adds row[0]
  for (int o = 16; o > 0; o /= 2)
    acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = partial[0];
    for (int k = 1; k < threads / 32; ++k)
      total += partial[k];
    y[blockIdx.x] = total;
  }
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 1 || n_out != 1 || in[0].dtype != KG_FLOAT32 || out[0].dtype != KG_FLOAT32 ||
      in[0].ndim != 2 || out[0].ndim != 1 || out[0].shape[0] != in[0].shape[0])
    return 1;
  const int64_t rows = in[0].shape[0], cols = in[0].shape[1];
  if (rows == 0) return 0;
  // P(no row dropped) = (1 - p)^rows = 1/2.
  const double p = 1.0 - std::pow(0.5, 1.0 / static_cast<double>(rows));
  const uint32_t drop_below = static_cast<uint32_t>(std::fmin(p * 4294967296.0, 4294967295.0));
  sum_kernel<<<static_cast<unsigned>(rows), threads, 0, s>>>(
      static_cast<const float*>(in[0].data), static_cast<float*>(out[0].data), cols, drop_below);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
