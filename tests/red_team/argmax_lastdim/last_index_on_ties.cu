// Red team (a wrong kernel, no cheat): argmax that keeps the LAST index of the maximum: each
// thread scans its slice with >=, and the reduction prefers the larger index on equal values.
// torch.argmax (and the task) wants the first. Indistinguishable while no row has a tied
// maximum, which N(0,1) rows essentially never have; the ties regime gives every row one.
#include <cfloat>

#include "kg_candidate.h"

namespace {
constexpr int threads = 256;

__device__ __forceinline__ void take_better(float& v, int64_t& i, float ov, int64_t oi) {
  if (ov > v || (ov == v && oi > i)) { // the fault: `oi < i` keeps the first
    v = ov;
    i = oi;
  }
}

__global__ void argmax_kernel(const float* __restrict__ x, int64_t* __restrict__ y, int64_t cols) {
  __shared__ float part_v[threads / 32];
  __shared__ int64_t part_i[threads / 32];
  const float* row = x + blockIdx.x * cols;
  float best = -FLT_MAX;
  int64_t at = -1; // before every real index: loses every tie
  for (int64_t c = threadIdx.x; c < cols; c += threads) {
    const float v = row[c];
    if (v >= best) { // the fault: > keeps the first
      best = v;
      at = c;
    }
  }
  for (int o = 16; o > 0; o /= 2) {
    const float ov = __shfl_xor_sync(0xffffffffu, best, o);
    const int64_t oi = __shfl_xor_sync(0xffffffffu, at, o);
    take_better(best, at, ov, oi);
  }
  if (threadIdx.x % 32 == 0) {
    part_v[threadIdx.x / 32] = best;
    part_i[threadIdx.x / 32] = at;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int k = 1; k < threads / 32; ++k)
      take_better(best, at, part_v[k], part_i[k]);
    y[blockIdx.x] = at;
  }
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 1 || n_out != 1 || in[0].dtype != KG_FLOAT32 || out[0].dtype != KG_INT64 ||
      in[0].ndim != 2 || out[0].ndim != 1 || out[0].shape[0] != in[0].shape[0])
    return 1;
  if (in[0].shape[0] == 0) return 0;
  argmax_kernel<<<static_cast<unsigned>(in[0].shape[0]), threads, 0, s>>>(
      static_cast<const float*>(in[0].data), static_cast<int64_t*>(out[0].data), in[0].shape[1]);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
