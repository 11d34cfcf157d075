// RoPE and the KV-cache append of the decode step: elementwise, one thread per element pair, so
// nothing here depends on where a block runs.
#include <cmath>

#include "kernels/decode/decode_kernels.h"
#include "kernels/decode/decode_math.cuh"

namespace kg::decode {
namespace {

constexpr int threads = 256;

// Thread per (row, pair i); it rotates pair i of every head at the row's position.
__global__ void rope_kernel(__nv_bfloat16* __restrict__ x, int rows, std::int64_t row_stride,
                            int heads, int head_dim, const int* __restrict__ positions,
                            double log_theta) {
  const int half = head_dim / 2;
  const int t = blockIdx.x * threads + threadIdx.x;
  if (t >= rows * half) return;
  const int b = t / half, i = t % half;
  float c, s;
  math::rope_cos_sin(positions[b], i, head_dim, log_theta, &c, &s);
  __nv_bfloat16* row = x + b * row_stride;
  for (int h = 0; h < heads; ++h) {
    __nv_bfloat16* p = row + static_cast<std::int64_t>(h) * head_dim;
    math::rope_rotate(__bfloat162float(p[i]), __bfloat162float(p[i + half]), c, s, &p[i],
                      &p[i + half]);
  }
}

// Thread per 8 elements (16 bytes) of one row's K or V.
__global__ void kv_append_kernel(const __nv_bfloat16* __restrict__ k,
                                 const __nv_bfloat16* __restrict__ v, std::int64_t row_stride,
                                 __nv_bfloat16* __restrict__ kc, __nv_bfloat16* __restrict__ vc,
                                 const int* __restrict__ slots, const int* __restrict__ positions,
                                 int rows, int kv_heads, int head_dim, int max_context) {
  const int vecs = kv_heads * head_dim / 8; // per row, per tensor
  const int t = blockIdx.x * threads + threadIdx.x;
  if (t >= rows * vecs * 2) return;
  const int which = t / (rows * vecs), r = t % (rows * vecs);
  const int b = r / vecs, e = (r % vecs) * 8, h = e / head_dim, d = e % head_dim;
  const __nv_bfloat16* src = (which == 0 ? k : v) + b * row_stride + e;
  __nv_bfloat16* dst = which == 0 ? kc : vc;
  const std::size_t at =
      ((static_cast<std::size_t>(slots[b]) * kv_heads + h) * max_context + positions[b]) *
          head_dim +
      d;
  *reinterpret_cast<uint4*>(dst + at) = *reinterpret_cast<const uint4*>(src);
}

} // namespace

cudaError_t launch_rope(__nv_bfloat16* x, int rows, std::int64_t row_stride, int heads,
                        int head_dim, const int* positions, double theta, cudaStream_t s) {
  if (rows < 1 || heads < 1 || head_dim < 2 || head_dim % 2 || !x || !positions || !(theta > 1))
    return cudaErrorInvalidValue;
  const int n = rows * head_dim / 2;
  rope_kernel<<<(n + threads - 1) / threads, threads, 0, s>>>(x, rows, row_stride, heads, head_dim,
                                                              positions, std::log(theta));
  return cudaGetLastError();
}

cudaError_t launch_kv_append(const __nv_bfloat16* k, const __nv_bfloat16* v,
                             std::int64_t row_stride, __nv_bfloat16* k_cache,
                             __nv_bfloat16* v_cache, const int* slots, const int* positions,
                             int rows, int kv_heads, int head_dim, int max_context,
                             cudaStream_t s) {
  // 16-byte vectors: head_dim and the row stride in whole vectors, the pointers 16-byte aligned.
  if (rows < 1 || kv_heads < 1 || head_dim % 8 || row_stride % 8 || max_context < 1 ||
      reinterpret_cast<std::uintptr_t>(k) % 16 || reinterpret_cast<std::uintptr_t>(v) % 16 ||
      !k_cache || !v_cache || !slots || !positions)
    return cudaErrorInvalidValue;
  const int n = rows * kv_heads * head_dim / 8 * 2;
  kv_append_kernel<<<(n + threads - 1) / threads, threads, 0, s>>>(
      k, v, row_stride, k_cache, v_cache, slots, positions, rows, kv_heads, head_dim, max_context);
  return cudaGetLastError();
}

} // namespace kg::decode
