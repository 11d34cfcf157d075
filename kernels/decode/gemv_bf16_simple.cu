#include "kernels/decode/gemv_bf16_simple.h"

#include <cstdint>

namespace kg {
namespace {

constexpr int warps = 8, rows_per_pass = 8; // batch rows sharing one read of a weight row

__device__ __forceinline__ void unpack8(const uint4& raw, float out[8]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

// Warp per output row n; batch rows in passes of rows_per_pass (the weight row re-read per pass).
__global__ void gemv_kernel(const __nv_bfloat16* __restrict__ x,
                            const __nv_bfloat16* __restrict__ w, __nv_bfloat16* __restrict__ y,
                            int batch, int n, int k) {
  const int row = blockIdx.x * warps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= n) return;
  const __nv_bfloat16* wr = w + static_cast<std::size_t>(row) * k;
  for (int b0 = 0; b0 < batch; b0 += rows_per_pass) {
    float acc[rows_per_pass] = {};
    for (int c = lane * 8; c < k; c += 32 * 8) {
      float wv[8];
      unpack8(*reinterpret_cast<const uint4*>(wr + c), wv);
#pragma unroll
      for (int r = 0; r < rows_per_pass; ++r) {
        if (b0 + r >= batch) break;
        float xv[8];
        unpack8(*reinterpret_cast<const uint4*>(x + static_cast<std::size_t>(b0 + r) * k + c), xv);
#pragma unroll
        for (int i = 0; i < 8; ++i)
          acc[r] = fmaf(xv[i], wv[i], acc[r]);
      }
    }
#pragma unroll
    for (int r = 0; r < rows_per_pass; ++r) {
      float v = acc[r];
      for (int o = 16; o > 0; o /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, o);
      if (lane == 0 && b0 + r < batch)
        y[static_cast<std::size_t>(b0 + r) * n + row] = __float2bfloat16(v);
    }
  }
}

} // namespace

cudaError_t launch_gemv_bf16_simple(const __nv_bfloat16* x, const __nv_bfloat16* w,
                                    __nv_bfloat16* y, int batch, int n, int k, cudaStream_t s) {
  if (batch < 1 || n < 1 || k < 8 || k % 8 || !x || !w || !y ||
      reinterpret_cast<std::uintptr_t>(x) % 16 || reinterpret_cast<std::uintptr_t>(w) % 16)
    return cudaErrorInvalidValue;
  gemv_kernel<<<(n + warps - 1) / warps, warps * 32, 0, s>>>(x, w, y, batch, n, k);
  return cudaGetLastError();
}

} // namespace kg
