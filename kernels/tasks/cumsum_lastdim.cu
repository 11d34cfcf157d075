// Task cumsum_lastdim: inclusive prefix sums over the last dimension of x (R, C), float32. One
// block per row walks the row in chunks of threads x items elements: a coalesced load into shared
// memory, a sequential scan of `items` consecutive elements per thread, a warp-shuffle scan of the
// thread totals, a scan of the warp totals, and the running carry of the earlier chunks.
#include "kg_candidate.h"

namespace {
constexpr int threads = 256, items = 8, chunk = threads * items;

__global__ void cumsum_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
  __shared__ float buf[chunk];
  __shared__ float warp_total[threads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float* row = x + blockIdx.x * cols;
  float* out = y + blockIdx.x * cols;
  float carry = 0.0f; // sum of the chunks before this one
  for (int64_t base = 0; base < cols; base += chunk) {
    for (int k = threadIdx.x; k < chunk; k += threads)
      buf[k] = base + k < cols ? row[base + k] : 0.0f;
    __syncthreads();
    float v[items];
    float run = 0.0f;
#pragma unroll
    for (int i = 0; i < items; ++i) {
      run += buf[threadIdx.x * items + i];
      v[i] = run;
    }
    // Inclusive scan of the thread totals within the warp.
    float incl = run;
    for (int o = 1; o < 32; o *= 2) {
      const float up = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += up;
    }
    // The earlier threads of this warp, shuffled up (not incl - run: one rounding fewer).
    const float up1 = __shfl_up_sync(0xffffffffu, incl, 1);
    const float excl = lane == 0 ? 0.0f : up1;
    if (lane == 31) warp_total[warp] = incl;
    __syncthreads();
    float before = carry, chunk_total = 0.0f;
    for (int w = 0; w < threads / 32; ++w) {
      if (w < warp) before += warp_total[w];
      chunk_total += warp_total[w];
    }
    before += excl;
#pragma unroll
    for (int i = 0; i < items; ++i)
      buf[threadIdx.x * items + i] = before + v[i];
    __syncthreads();
    for (int k = threadIdx.x; k < chunk; k += threads)
      if (base + k < cols) out[base + k] = buf[k];
    carry += chunk_total;
    __syncthreads(); // buf and warp_total are rewritten by the next chunk
  }
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 1 || n_out != 1 || in[0].dtype != KG_FLOAT32 || out[0].dtype != KG_FLOAT32 ||
      in[0].ndim != 2 || out[0].ndim != 2 || out[0].shape[0] != in[0].shape[0] ||
      out[0].shape[1] != in[0].shape[1])
    return 1;
  if (in[0].shape[0] == 0) return 0;
  cumsum_kernel<<<static_cast<unsigned>(in[0].shape[0]), threads, 0, s>>>(
      static_cast<const float*>(in[0].data), static_cast<float*>(out[0].data), in[0].shape[1]);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
