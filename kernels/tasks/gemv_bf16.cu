// Task gemv_bf16: y (N) = W (N, K) @ x (K), bfloat16 inputs and output, float32 accumulation.
// One warp per row of W: 16-byte loads (8 bf16) of W and x where K is a multiple of 8 and the
// buffers are aligned, element loads otherwise; a warp-shuffle sum at the end.
#include <cuda_bf16.h>

#include "kg_candidate.h"

namespace {
using bf16 = __nv_bfloat16;
constexpr int threads = 256, rows_per_block = threads / 32;

__device__ __forceinline__ float dot8(const uint4& wv, const uint4& xv) {
  const auto* w2 = reinterpret_cast<const __nv_bfloat162*>(&wv);
  const auto* x2 = reinterpret_cast<const __nv_bfloat162*>(&xv);
  float acc = 0.0f;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const float2 a = __bfloat1622float2(w2[q]), b = __bfloat1622float2(x2[q]);
    acc += a.x * b.x + a.y * b.y;
  }
  return acc;
}

__global__ void gemv_kernel(const bf16* __restrict__ w, const bf16* __restrict__ x,
                            bf16* __restrict__ y, int64_t n, int64_t k, bool vec) {
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * rows_per_block + threadIdx.x / 32;
  if (row >= n) return; // no block-wide barrier below
  const bf16* wr = w + row * k;
  float acc = 0.0f;
  if (vec) {
    const uint4* w4 = reinterpret_cast<const uint4*>(wr);
    const uint4* x4 = reinterpret_cast<const uint4*>(x);
#pragma unroll 4
    for (int64_t v = lane; v < k / 8; v += 32)
      acc += dot8(w4[v], x4[v]);
  } else {
    for (int64_t p = lane; p < k; p += 32)
      acc += __bfloat162float(wr[p]) * __bfloat162float(x[p]);
  }
  for (int o = 16; o > 0; o /= 2)
    acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (lane == 0) y[row] = __float2bfloat16(acc);
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 2 || n_out != 1 || in[0].dtype != KG_BFLOAT16 || in[1].dtype != KG_BFLOAT16 ||
      out[0].dtype != KG_BFLOAT16 || in[0].ndim != 2 || in[1].ndim != 1 || out[0].ndim != 1)
    return 1;
  const int64_t n = in[0].shape[0], k = in[0].shape[1];
  if (in[1].shape[0] != k || out[0].shape[0] != n) return 1;
  if (n == 0) return 0;
  const bool vec = k % 8 == 0 && reinterpret_cast<uintptr_t>(in[0].data) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(in[1].data) % 16 == 0;
  gemv_kernel<<<static_cast<unsigned>((n + rows_per_block - 1) / rows_per_block), threads, 0, s>>>(
      static_cast<const bf16*>(in[0].data), static_cast<const bf16*>(in[1].data),
      static_cast<bf16*>(out[0].data), n, k, vec);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
