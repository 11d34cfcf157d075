// RMSNorm kernels of the decode step: the residual add fused with the layer norm, and the per-head
// q/k norm. Sums of squares reduce in a fixed order (lane shuffles, then warps in index order):
// the same bits whatever SM runs the block.
#include <cstdint>

#include "kernels/decode/decode_kernels.h"
#include "kernels/decode/decode_math.cuh"
#include "kernels/decode/programmatic_launch.cuh"

namespace kg::decode {
namespace {

constexpr int norm_threads = math::rmsnorm_threads; // (row_inv_rms_warp repeats its order)
using math::inv_rms;
using math::scale_round;
using math::warp_sum;

// One block per row, 16-byte accesses: thread t holds chunks t, t + 256, ... (CH of them) of the
// row in registers between the sum of squares and the scaling, so the row is read once. The
// weight does not depend on the kernel ahead: its chunks are loaded before the programmatic wait,
// overlapping that kernel's tail. (The first form, 2-byte accesses and a second pass over the
// row, was slower: docs/architecture.md has both forms' times in the step.)
template <int CH>
__global__ void __launch_bounds__(norm_threads)
    add_rmsnorm_kernel(const __nv_bfloat16* __restrict__ delta, __nv_bfloat16* __restrict__ hidden,
                       const __nv_bfloat16* __restrict__ w, __nv_bfloat16* __restrict__ out,
                       int cols, float eps) {
  __shared__ float partial[norm_threads / 32];
  const int t = static_cast<int>(threadIdx.x), c8 = cols / 8;
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * c8;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  uint4 wv[CH];
#pragma unroll
  for (int j = 0; j < CH; ++j) {
    const int c = t + j * norm_threads;
    wv[j] = c < c8 ? __ldg(reinterpret_cast<const uint4*>(w) + c) : zero;
  }
  // A programmatic launch: nothing the kernel ahead writes is read before it is done; then the
  // next GEMV may be scheduled at once, onto the GPU the GEMV ahead has left, and issue its first
  // weight loads while this kernel runs.
  pdl::wait();
  pdl::allow_dependents();
  uint4* hrow = reinterpret_cast<uint4*>(hidden) + base;
  uint4 hv[CH], dv[CH];
#pragma unroll
  for (int j = 0; j < CH; ++j) {
    const int c = t + j * norm_threads;
    hv[j] = c < c8 ? hrow[c] : zero;
    dv[j] = c < c8 && delta ? reinterpret_cast<const uint4*>(delta)[base + c] : zero;
  }
  float h[CH][8], ss = 0.0f;
#pragma unroll
  for (int j = 0; j < CH; ++j) {
    const int c = t + j * norm_threads;
    math::unpack8(hv[j], h[j]);
    if (delta) {
      float d[8];
      math::unpack8(dv[j], d);
#pragma unroll
      for (int e = 0; e < 8; ++e) // the residual stream: one bf16 rounding of the sum
        h[j][e] = __bfloat162float(__float2bfloat16(__fadd_rn(h[j][e], d[e])));
      if (c < c8) hrow[c] = math::pack8(h[j]);
    }
#pragma unroll
    for (int e = 0; e < 8; ++e)
      ss = __fmaf_rn(h[j][e], h[j][e], ss); // masked chunks are zeros: they add nothing
  }
  ss = warp_sum(ss);
  if (t % 32 == 0) partial[t / 32] = ss;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int k = 0; k < norm_threads / 32; ++k) // warp order: fixed
    total += partial[k];
  const float inv = inv_rms(total, cols, eps);
#pragma unroll
  for (int j = 0; j < CH; ++j) {
    const int c = t + j * norm_threads;
    if (c >= c8) continue;
    const __nv_bfloat16* wj = reinterpret_cast<const __nv_bfloat16*>(&wv[j]);
    float o[8];
#pragma unroll
    for (int e = 0; e < 8; ++e)
      o[e] = __bfloat162float(scale_round(h[j][e], inv, wj[e]));
    reinterpret_cast<uint4*>(out)[base + c] = math::pack8(o);
  }
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
  // 16-byte rows: cols a multiple of 8 and 16-byte aligned bases; at most 4 chunks a thread.
  const auto misaligned = [](const void* p) {
    return reinterpret_cast<std::uintptr_t>(p) % 16 != 0;
  };
  if (rows < 1 || cols < 8 || cols % 8 != 0 || cols > 4 * 8 * norm_threads || !hidden || !weight ||
      !out || misaligned(hidden) || misaligned(weight) || misaligned(out) ||
      (delta && misaligned(delta)))
    return cudaErrorInvalidValue;
  const int ch = (cols / 8 + norm_threads - 1) / norm_threads;
  auto launch = [&](auto kernel) {
    return pdl::launch(kernel, dim3(rows), dim3(norm_threads), 0, s, programmatic, 1u, delta,
                       hidden, weight, out, cols, eps);
  };
  switch (ch) {
  case 1:
    return launch(add_rmsnorm_kernel<1>);
  case 2:
    return launch(add_rmsnorm_kernel<2>);
  case 3:
    return launch(add_rmsnorm_kernel<3>);
  default:
    return launch(add_rmsnorm_kernel<4>);
  }
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
