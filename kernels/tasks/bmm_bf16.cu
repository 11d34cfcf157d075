// Task bmm_bf16: C[b] (M, N) = A[b] (M, K) @ B[b] (K, N) for each batch b, bfloat16 inputs and
// output, float32 accumulation on the tensor cores (wmma bf16 16x16x16); the batch is grid z.
#include <cuda_bf16.h>
#include <mma.h>

#include "kg_candidate.h"

namespace {
using bf16 = __nv_bfloat16;
namespace wmma = nvcuda::wmma;

// 64 x 64 output tile per block of 4 warps (2 x 2, each 32 x 32 = 2 x 2 fragments of 16 x 16),
// K walked 32 at a time. Shared rows are padded by 8 (16 bytes) against bank conflicts while
// keeping every fragment pointer 32-byte aligned, as wmma requires.
constexpr int bm = 64, bn = 64, bk = 32, threads = 128;
constexpr int lda = bk + 8, ldb = bn + 8, ldc = bn + 4;

// VEC: K and N are multiples of 8 and the buffers 16-byte aligned, so tiles load as uint4 (8
// bf16) vectors that lie wholly inside or wholly outside the matrix; else element by element.
template <bool VEC>
__global__ void __launch_bounds__(threads)
    matmul_kernel(const bf16* __restrict__ a, const bf16* __restrict__ b, bf16* __restrict__ c,
                  int64_t m, int64_t n, int64_t k) {
  __shared__ __align__(128) bf16 as[bm * lda];
  __shared__ __align__(128) bf16 bs[bk * ldb];
  __shared__ __align__(128) float cs[bm * ldc];
  a += blockIdx.z * m * k; // batch (bmm); zero for a single product
  b += blockIdx.z * k * n;
  c += blockIdx.z * m * n;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * bm,
                n0 = static_cast<int64_t>(blockIdx.x) * bn;
  const int warp = threadIdx.x / 32, wm = warp / 2, wn = warp % 2;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      wmma::fill_fragment(acc[i][j], 0.0f);
  const bf16 zero = __float2bfloat16(0.0f);
  for (int64_t k0 = 0; k0 < k; k0 += bk) {
    if constexpr (VEC) {
      const uint4 z4 = make_uint4(0, 0, 0, 0);
      for (int v = threadIdx.x; v < bm * bk / 8; v += threads) {
        const int r = v / (bk / 8), col = (v % (bk / 8)) * 8;
        const int64_t gm = m0 + r, gk = k0 + col;
        *reinterpret_cast<uint4*>(as + r * lda + col) =
            gm < m && gk < k ? *reinterpret_cast<const uint4*>(a + gm * k + gk) : z4;
      }
      for (int v = threadIdx.x; v < bk * bn / 8; v += threads) {
        const int r = v / (bn / 8), col = (v % (bn / 8)) * 8;
        const int64_t gk = k0 + r, gn = n0 + col;
        *reinterpret_cast<uint4*>(bs + r * ldb + col) =
            gk < k && gn < n ? *reinterpret_cast<const uint4*>(b + gk * n + gn) : z4;
      }
    } else {
      for (int e = threadIdx.x; e < bm * bk; e += threads) {
        const int r = e / bk, col = e % bk;
        const int64_t gm = m0 + r, gk = k0 + col;
        as[r * lda + col] = gm < m && gk < k ? a[gm * k + gk] : zero;
      }
      for (int e = threadIdx.x; e < bk * bn; e += threads) {
        const int r = e / bn, col = e % bn;
        const int64_t gk = k0 + r, gn = n0 + col;
        bs[r * ldb + col] = gk < k && gn < n ? b[gk * n + gn] : zero;
      }
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < bk; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> fb[2];
#pragma unroll
      for (int i = 0; i < 2; ++i)
        wmma::load_matrix_sync(fa[i], as + (wm * 32 + i * 16) * lda + kk, lda);
#pragma unroll
      for (int j = 0; j < 2; ++j)
        wmma::load_matrix_sync(fb[j], bs + kk * ldb + wn * 32 + j * 16, ldb);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
          wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads(); // the tiles are overwritten next
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(cs + (wm * 32 + i * 16) * ldc + wn * 32 + j * 16, acc[i][j], ldc,
                              wmma::mem_row_major);
  __syncthreads();
  for (int e = threadIdx.x; e < bm * bn; e += threads) {
    const int r = e / bn, col = e % bn;
    const int64_t gm = m0 + r, gn = n0 + col;
    if (gm < m && gn < n) c[gm * n + gn] = __float2bfloat16(cs[r * ldc + col]);
  }
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

int launch(const kg_tensor& a, const kg_tensor& b, kg_tensor& c, int64_t batch, int64_t m,
           int64_t n, int64_t k, cudaStream_t s) {
  if (batch == 0 || m == 0 || n == 0) return 0;
  if ((m + bm - 1) / bm > 65535 || batch > 65535) return 3; // grid y and z limits
  const dim3 grid(static_cast<unsigned>((n + bn - 1) / bn),
                  static_cast<unsigned>((m + bm - 1) / bm), static_cast<unsigned>(batch));
  const auto* pa = static_cast<const bf16*>(a.data);
  const auto* pb = static_cast<const bf16*>(b.data);
  auto* pc = static_cast<bf16*>(c.data);
  if (k % 8 == 0 && n % 8 == 0 && aligned16(pa) && aligned16(pb))
    matmul_kernel<true><<<grid, threads, 0, s>>>(pa, pb, pc, m, n, k);
  else
    matmul_kernel<false><<<grid, threads, 0, s>>>(pa, pb, pc, m, n, k);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 2 || n_out != 1 || in[0].dtype != KG_BFLOAT16 || in[1].dtype != KG_BFLOAT16 ||
      out[0].dtype != KG_BFLOAT16 || in[0].ndim != 3 || in[1].ndim != 3 || out[0].ndim != 3)
    return 1;
  const int64_t batch = in[0].shape[0], m = in[0].shape[1], k = in[0].shape[2], n = in[1].shape[2];
  if (in[1].shape[0] != batch || in[1].shape[1] != k || out[0].shape[0] != batch ||
      out[0].shape[1] != m || out[0].shape[2] != n)
    return 1;
  return launch(in[0], in[1], out[0], batch, m, n, k, s);
}
