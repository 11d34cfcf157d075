// RMSNorm kernels of the decode step: the residual add fused with the layer norm, and the per-head
// q/k norm. Sums of squares reduce in a fixed order (lane shuffles, then warps in index order):
// the same bits whatever SM runs the block.
#include "kernels/decode/decode_kernels.h"
#include "kernels/decode/decode_math.cuh"
#include "kernels/decode/programmatic_launch.cuh"

namespace kg::decode {
namespace {

constexpr int norm_threads = 256;
using math::inv_rms;
using math::scale_round;
using math::warp_sum;

// One block per row.
__global__ void add_rmsnorm_kernel(const __nv_bfloat16* __restrict__ delta,
                                   __nv_bfloat16* __restrict__ hidden,
                                   const __nv_bfloat16* __restrict__ w,
                                   __nv_bfloat16* __restrict__ out, int cols, float eps) {
  __shared__ float partial[norm_threads / 32];
  pdl::wait(); // a programmatic launch: nothing is read before the kernel ahead is done
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * cols;
  float ss = 0.0f;
  for (int c = threadIdx.x; c < cols; c += norm_threads) {
    float v = __bfloat162float(hidden[base + c]);
    if (delta) {
      const __nv_bfloat16 h = __float2bfloat16(v + __bfloat162float(delta[base + c]));
      hidden[base + c] = h; // read back below by this thread only
      v = __bfloat162float(h);
    }
    ss += v * v;
  }
  ss = warp_sum(ss);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = ss;
  __syncthreads();
  float total = 0.0f;
  for (int k = 0; k < norm_threads / 32; ++k)
    total += partial[k];
  const float inv = inv_rms(total, cols, eps);
  for (int c = threadIdx.x; c < cols; c += norm_threads)
    out[base + c] = scale_round(__bfloat162float(hidden[base + c]), inv, w[c]);
  pdl::allow_dependents(); // at the end: the next GEMV then spreads over an idle GPU
}

// One warp per (row, head); lane j holds elements j, j + 32, ... of the head.
template <int per_lane>
__global__ void head_rmsnorm_kernel(__nv_bfloat16* __restrict__ x, int rows,
                                    std::int64_t row_stride, int heads,
                                    const __nv_bfloat16* __restrict__ w, float eps) {
  const int warp = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= rows * heads) return;
  const int b = warp / heads, h = warp % heads;
  constexpr int head_dim = per_lane * 32;
  __nv_bfloat16* p = x + b * row_stride + static_cast<std::int64_t>(h) * head_dim;
  float v[per_lane], ss = 0.0f;
#pragma unroll
  for (int j = 0; j < per_lane; ++j) {
    v[j] = __bfloat162float(p[lane + 32 * j]);
    ss = __fmaf_rn(v[j], v[j], ss); // as qk_norm_rope_append.cu: bit-identical heads
  }
  ss = warp_sum(ss);
  const float inv = inv_rms(ss, head_dim, eps);
#pragma unroll
  for (int j = 0; j < per_lane; ++j)
    p[lane + 32 * j] = scale_round(v[j], inv, w[lane + 32 * j]);
}

} // namespace

cudaError_t launch_add_rmsnorm(const __nv_bfloat16* delta, __nv_bfloat16* hidden,
                               const __nv_bfloat16* weight, __nv_bfloat16* out, int rows, int cols,
                               float eps, cudaStream_t s, bool programmatic) {
  if (rows < 1 || cols < 1 || !hidden || !weight || !out) return cudaErrorInvalidValue;
  return pdl::launch(add_rmsnorm_kernel, dim3(rows), dim3(norm_threads), 0, s, programmatic, 1u,
                     delta, hidden, weight, out, cols, eps);
}

cudaError_t launch_head_rmsnorm(__nv_bfloat16* x, int rows, std::int64_t row_stride, int heads,
                                int head_dim, const __nv_bfloat16* weight, float eps,
                                cudaStream_t s) {
  if (rows < 1 || heads < 1 || !x || !weight) return cudaErrorInvalidValue;
  constexpr int warps = 8;
  const int blocks = (rows * heads + warps - 1) / warps;
  switch (head_dim) {
  case 64:
    head_rmsnorm_kernel<2><<<blocks, warps * 32, 0, s>>>(x, rows, row_stride, heads, weight, eps);
    break;
  case 128:
    head_rmsnorm_kernel<4><<<blocks, warps * 32, 0, s>>>(x, rows, row_stride, heads, weight, eps);
    break;
  case 256:
    head_rmsnorm_kernel<8><<<blocks, warps * 32, 0, s>>>(x, rows, row_stride, heads, weight, eps);
    break;
  default:
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

} // namespace kg::decode
