// Task qwen3_decode_linear_bf16: y[b, n] = sum_k x[b, k] w[n, k] for a small batch B (1..32).
// Memory-bound: every weight byte is read once. One warp per output row n computes all B dot
// products, so the row is streamed once whatever B is; each lane loads 16 bytes (8 bf16) of the
// row per step, two steps in flight, and the batch rows of x come through L1/L2 (B x K x 2 bytes
// is at most 623 KB, read by every warp). Float32 accumulation, one rounding to bf16 per output.
// The batch size is a template parameter (1, 2, 4, 8; larger batches in groups of 8) so the
// accumulators live in registers. Rows whose length is not a multiple of 8 take a scalar path.
#include <cuda_bf16.h>

#include "kg_candidate.h"

namespace {

constexpr int warps_per_block = 8;

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ void fma8(const uint4& w, const uint4& x, float& acc) {
  const __nv_bfloat162* wp = reinterpret_cast<const __nv_bfloat162*>(&w);
  const __nv_bfloat162* xp = reinterpret_cast<const __nv_bfloat162*>(&x);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 a = __bfloat1622float2(wp[i]), b = __bfloat1622float2(xp[i]);
    acc = fmaf(a.x, b.x, acc);
    acc = fmaf(a.y, b.y, acc);
  }
}

// Vector path: K % 8 == 0 (16-byte rows). Batch rows [b0, b0 + B) of x and y.
template <int B>
__global__ void linear_vec(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                           __nv_bfloat16* __restrict__ y, int batch, int n_rows, int k, int b0) {
  const int row = blockIdx.x * warps_per_block + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= n_rows) return;
  const int k8 = k / 8;
  const uint4* wr = reinterpret_cast<const uint4*>(w + static_cast<size_t>(row) * k);
  float acc[B];
#pragma unroll
  for (int b = 0; b < B; ++b)
    acc[b] = 0.0f;
  int i = lane;
  for (; i + 32 < k8; i += 64) { // two 16-byte weight loads in flight per lane
    const uint4 w0 = __ldcs(wr + i), w1 = __ldcs(wr + i + 32);
#pragma unroll
    for (int b = 0; b < B; ++b) {
      const uint4* xr = reinterpret_cast<const uint4*>(x + static_cast<size_t>(b0 + b) * k);
      fma8(w0, __ldg(xr + i), acc[b]);
      fma8(w1, __ldg(xr + i + 32), acc[b]);
    }
  }
  for (; i < k8; i += 32) {
    const uint4 w0 = __ldcs(wr + i);
#pragma unroll
    for (int b = 0; b < B; ++b)
      fma8(w0, __ldg(reinterpret_cast<const uint4*>(x + static_cast<size_t>(b0 + b) * k) + i),
           acc[b]);
  }
#pragma unroll
  for (int b = 0; b < B; ++b) {
    const float s = warp_sum(acc[b]);
    if (lane == 0) y[static_cast<size_t>(b0 + b) * n_rows + row] = __float2bfloat16(s);
  }
}

// Scalar path for any K (rows not 16-byte aligned), one batch row at a time.
__global__ void linear_scalar(const __nv_bfloat16* __restrict__ x,
                              const __nv_bfloat16* __restrict__ w, __nv_bfloat16* __restrict__ y,
                              int batch, int n_rows, int k) {
  const int row = blockIdx.x * warps_per_block + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= n_rows) return;
  for (int b = 0; b < batch; ++b) {
    float acc = 0.0f;
    for (int i = lane; i < k; i += 32)
      acc = fmaf(__bfloat162float(w[static_cast<size_t>(row) * k + i]),
                 __bfloat162float(x[static_cast<size_t>(b) * k + i]), acc);
    acc = warp_sum(acc);
    if (lane == 0) y[static_cast<size_t>(b) * n_rows + row] = __float2bfloat16(acc);
  }
}

template <int B>
void launch_vec(const kg_tensor* in, kg_tensor* out, int batch, int n, int k, int b0,
                cudaStream_t s) {
  const unsigned blocks = static_cast<unsigned>((n + warps_per_block - 1) / warps_per_block);
  linear_vec<B><<<blocks, 32 * warps_per_block, 0, s>>>(
      static_cast<const __nv_bfloat16*>(in[0].data), static_cast<const __nv_bfloat16*>(in[1].data),
      static_cast<__nv_bfloat16*>(out[0].data), batch, n, k, b0);
}

} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 2 || n_out != 1 || in[0].dtype != KG_BFLOAT16 || in[1].dtype != KG_BFLOAT16 ||
      in[0].ndim != 2 || in[1].ndim != 2 || in[0].shape[1] != in[1].shape[1])
    return 1;
  const int batch = static_cast<int>(in[0].shape[0]), n = static_cast<int>(in[1].shape[0]),
            k = static_cast<int>(in[0].shape[1]);
  if (k % 8 != 0) {
    const unsigned blocks = static_cast<unsigned>((n + warps_per_block - 1) / warps_per_block);
    linear_scalar<<<blocks, 32 * warps_per_block, 0, s>>>(
        static_cast<const __nv_bfloat16*>(in[0].data),
        static_cast<const __nv_bfloat16*>(in[1].data), static_cast<__nv_bfloat16*>(out[0].data),
        batch, n, k);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
  }
  // Groups of 8 batch rows, then the remainder with the largest power of two that fits.
  int b0 = 0;
  for (; batch - b0 >= 8; b0 += 8)
    launch_vec<8>(in, out, batch, n, k, b0, s);
  for (int left = batch - b0; left > 0; left = batch - b0) {
    if (left >= 4) {
      launch_vec<4>(in, out, batch, n, k, b0, s);
      b0 += 4;
    } else if (left >= 2) {
      launch_vec<2>(in, out, batch, n, k, b0, s);
      b0 += 2;
    } else {
      launch_vec<1>(in, out, batch, n, k, b0, s);
      b0 += 1;
    }
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
