// Task fused_softmax_cross_entropy: loss[r] = logsumexp(logits[r, :]) - logits[r, targets[r]],
// bfloat16 logits, float32 loss. One block per row: a max pass, then a sum of exp(x - max) pass
// (the second read of the row mostly hits L2), both reduced across the block in float32.
#include <cfloat>

#include <cuda_bf16.h>

#include "kg_candidate.h"

namespace {
constexpr int threads = 512;

__device__ float block_reduce(float v, bool is_max, float* shared) {
  for (int o = 16; o > 0; o /= 2) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, w) : v + w;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < threads / 32 ? shared[lane] : (is_max ? -FLT_MAX : 0.0f);
  for (int o = 16; o > 0; o /= 2) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, w) : v + w;
  }
  __syncthreads(); // shared is reused by the next reduction
  return v;
}

// Applies f to every element of the row: 8 at a time through 16-byte loads when V % 8 == 0.
template <bool vec, typename F>
__device__ void for_row(const __nv_bfloat16* __restrict__ row, int64_t V, F f) {
  if constexpr (vec) {
    for (int64_t i = threadIdx.x; i < V / 8; i += threads) {
      const uint4 raw = reinterpret_cast<const uint4*>(row)[i];
      const auto* e = reinterpret_cast<const __nv_bfloat16*>(&raw);
#pragma unroll
      for (int j = 0; j < 8; ++j)
        f(__bfloat162float(e[j]));
    }
  } else {
    for (int64_t i = threadIdx.x; i < V; i += threads)
      f(__bfloat162float(row[i]));
  }
}

template <bool vec>
__global__ void cross_entropy_kernel(const __nv_bfloat16* __restrict__ logits,
                                     const int64_t* __restrict__ targets, float* __restrict__ loss,
                                     int64_t V) {
  __shared__ float shared[threads / 32];
  const __nv_bfloat16* row = logits + static_cast<int64_t>(blockIdx.x) * V;
  float m = -FLT_MAX;
  for_row<vec>(row, V, [&](float x) { m = fmaxf(m, x); });
  m = block_reduce(m, true, shared);
  float sum = 0.0f;
  for_row<vec>(row, V, [&](float x) { sum += expf(x - m); });
  sum = block_reduce(sum, false, shared);
  if (threadIdx.x == 0) {
    const int64_t t = targets[blockIdx.x];
    // A target outside the vocabulary has no defined loss: NaN fails the check visibly.
    loss[blockIdx.x] = t >= 0 && t < V ? m + logf(sum) - __bfloat162float(row[t]) : NAN;
  }
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 2 || n_out != 1 || in[0].dtype != KG_BFLOAT16 || in[0].ndim != 2 ||
      in[1].dtype != KG_INT64 || in[1].ndim != 1 || out[0].dtype != KG_FLOAT32 || out[0].ndim != 1)
    return 1;
  const int64_t R = in[0].shape[0], V = in[0].shape[1];
  if (R < 1 || R > 2147483647 || V < 1 || in[1].shape[0] != R || out[0].shape[0] != R) return 1;
  const auto* x = static_cast<const __nv_bfloat16*>(in[0].data);
  const auto* t = static_cast<const int64_t*>(in[1].data);
  auto* loss = static_cast<float*>(out[0].data);
  if (V % 8 == 0)
    cross_entropy_kernel<true><<<static_cast<unsigned>(R), threads, 0, s>>>(x, t, loss, V);
  else
    cross_entropy_kernel<false><<<static_cast<unsigned>(R), threads, 0, s>>>(x, t, loss, V);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
