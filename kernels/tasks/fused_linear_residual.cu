// Task fused_linear_residual: y = x @ w^T + bias + residual, bfloat16 in and out. Tensor-core
// tiles (WMMA bf16 16x16x16 with float32 accumulators) staged through shared memory, tails
// zero-filled so any M, N, K works; bias and residual added in float32, one rounding (no bf16
// rounding of the linear output before the residual, unlike the unfused pair).
#include <cuda_bf16.h>
#include <mma.h>

#include "kg_candidate.h"

namespace {
namespace wmma = nvcuda::wmma;

// A 32x32 output tile per block, one 16x16 WMMA fragment per warp, K staged 64 at a time.
// Small tiles keep the 128x1024 shapes of the catalog spread over every SM.
constexpr int bm = 32, bn = 32, bk = 64, threads = 128;
constexpr int lds = bk + 8; // bf16 pitch of a staged row: a multiple of 8 (WMMA), off the banks
constexpr int ldc = bn + 4; // float pitch of the accumulator tile

// Copies rows [r0, r0 + rows) and columns [k0, k0 + bk) of the row-major [R, K] matrix src into
// dst, zero outside the matrix (the zeros add nothing to the products of the tail tiles).
template <bool vec, int rows>
__device__ void stage(const __nv_bfloat16* __restrict__ src, int64_t R, int64_t K, int64_t r0,
                      int64_t k0, __nv_bfloat16 (*dst)[lds]) {
  if constexpr (vec) { // K % 8 == 0: every 8-element chunk is 16-byte aligned and in or out whole
    for (int i = threadIdx.x; i < rows * (bk / 8); i += threads) {
      const int r = i / (bk / 8), c = i % (bk / 8) * 8;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (r0 + r < R && k0 + c < K)
        v = *reinterpret_cast<const uint4*>(src + (r0 + r) * K + k0 + c);
      *reinterpret_cast<uint4*>(&dst[r][c]) = v;
    }
  } else {
    for (int i = threadIdx.x; i < rows * bk; i += threads) {
      const int r = i / bk, c = i % bk;
      dst[r][c] = r0 + r < R && k0 + c < K ? src[(r0 + r) * K + k0 + c] : __float2bfloat16(0.0f);
    }
  }
}

template <bool vec>
__global__ void __launch_bounds__(threads)
    gemm_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                const __nv_bfloat16* __restrict__ bias, const __nv_bfloat16* __restrict__ residual,
                __nv_bfloat16* __restrict__ y, int64_t M, int64_t N, int64_t K) {
  __shared__ __align__(128) __nv_bfloat16 as[bm][lds];
  __shared__ __align__(128) __nv_bfloat16 bs[bn][lds];
  __shared__ __align__(128) float cs[bm][ldc];
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * bm,
                n0 = static_cast<int64_t>(blockIdx.x) * bn;
  const int warp = threadIdx.x / 32, wm = warp / 2, wn = warp % 2;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int64_t k0 = 0; k0 < K; k0 += bk) {
    stage<vec, bm>(x, M, K, m0, k0, as);
    stage<vec, bn>(w, N, K, n0, k0, bs);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < bk; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
      // B = w^T: element (k, n) is w[n][k], i.e. the staged w rows read column-major.
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b;
      wmma::load_matrix_sync(a, &as[wm * 16][kk], lds);
      wmma::load_matrix_sync(b, &bs[wn * 16][kk], lds);
      wmma::mma_sync(acc, a, b, acc);
    }
    __syncthreads(); // the next stage overwrites the tiles
  }
  wmma::store_matrix_sync(&cs[wm * 16][wn * 16], acc, ldc, wmma::mem_row_major);
  __syncthreads();
  for (int i = threadIdx.x; i < bm * bn; i += threads) {
    const int r = i / bn, c = i % bn;
    const int64_t m = m0 + r, n = n0 + c;
    if (m < M && n < N)
      y[m * N + n] = __float2bfloat16(cs[r][c] + __bfloat162float(bias[n]) +
                                      __bfloat162float(residual[m * N + n]));
  }
}

bool is_bf16(const kg_tensor& t, int ndim) {
  return t.dtype == KG_BFLOAT16 && t.ndim == ndim;
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 4 || n_out != 1) return 1;
  if (!is_bf16(in[0], 2) || !is_bf16(in[1], 2) || !is_bf16(in[2], 1) || !is_bf16(out[0], 2))
    return 1;
  const int64_t M = in[0].shape[0], K = in[0].shape[1], N = in[1].shape[0];
  if (M < 1 || N < 1 || K < 1 || in[1].shape[1] != K || in[2].shape[0] != N ||
      out[0].shape[0] != M || out[0].shape[1] != N || (M + bm - 1) / bm > 65535)
    return 1;
  if (!is_bf16(in[3], 2) || in[3].shape[0] != M || in[3].shape[1] != N) return 1;
  const dim3 grid(static_cast<unsigned>((N + bn - 1) / bn),
                  static_cast<unsigned>((M + bm - 1) / bm));
  const auto* x = static_cast<const __nv_bfloat16*>(in[0].data);
  const auto* w = static_cast<const __nv_bfloat16*>(in[1].data);
  const auto* bias = static_cast<const __nv_bfloat16*>(in[2].data);
  auto* y = static_cast<__nv_bfloat16*>(out[0].data);
  if (K % 8 == 0)
    gemm_kernel<true><<<grid, threads, 0, s>>>(
        x, w, bias, static_cast<const __nv_bfloat16*>(in[3].data), y, M, N, K);
  else
    gemm_kernel<false><<<grid, threads, 0, s>>>(
        x, w, bias, static_cast<const __nv_bfloat16*>(in[3].data), y, M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
