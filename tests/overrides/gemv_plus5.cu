// gemv_plain.cu with a planted 5% slowdown (KG_EXTRA_PERCENT 5): the regression compare must catch.
// A GEMV in the candidate ABI (kernels/abi/kg_candidate.h) for `kernelgate run --override
// gemv.<projection>=FILE.cu`: y[b, n] = sum_k x[b, k] w[n, k], bf16 in and out, float32
// accumulation. One warp per output row, every batch row at once; 16-byte loads.
// KG_EXTRA_PERCENT > 0 plants a slowdown: the last block to finish waits that share of the
// launch's run time so far (from the earliest block's start, on the global nanosecond timer), so
// the launch takes that much longer whatever bounds it, and nothing else changes: the results are
// the same bits. (A per-block wait held each block's SM slot and grew the launch by 8-45%.)
#include <cuda_bf16.h>

#include "kg_candidate.h"

#define KG_EXTRA_PERCENT 5
#ifndef KG_EXTRA_PERCENT
#define KG_EXTRA_PERCENT 0
#endif

namespace {

constexpr int max_batch = 32;
constexpr int warps = 8;

__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Row r of y for every batch row, by one warp.
__device__ void one_row(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                        __nv_bfloat16* __restrict__ y, int batch, int n, int k, int r, int lane) {
  float acc[max_batch];
  for (int b = 0; b < max_batch; ++b)
    acc[b] = 0.f;
  const uint4* wr = reinterpret_cast<const uint4*>(w + static_cast<long long>(r) * k);
  for (int c = lane; c < k / 8; c += 32) {
    const uint4 wv = __ldg(wr + c);
    const __nv_bfloat16* wp = reinterpret_cast<const __nv_bfloat16*>(&wv);
    float wf[8];
    for (int i = 0; i < 8; ++i)
      wf[i] = __bfloat162float(wp[i]);
    for (int b = 0; b < batch; ++b) {
      const uint4 xv = __ldg(reinterpret_cast<const uint4*>(x + static_cast<long long>(b) * k) + c);
      const __nv_bfloat16* xp = reinterpret_cast<const __nv_bfloat16*>(&xv);
      for (int i = 0; i < 8; ++i)
        acc[b] += wf[i] * __bfloat162float(xp[i]);
    }
  }
  for (int b = 0; b < batch; ++b) {
    float v = acc[b];
    for (int o = 16; o > 0; o /= 2)
      v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) y[static_cast<long long>(b) * n + r] = __float2bfloat16(v);
  }
}

// The planted delay's state: the launch's earliest block start and its finished blocks. The last
// block resets both, so the next launch on the stream starts clean.
__device__ unsigned long long g_first_start = ~0ull;
__device__ unsigned int g_blocks_done = 0;

__device__ void planted_delay() {
  __syncthreads(); // every warp of the block is done
  if (threadIdx.x != 0) return;
  __threadfence();
  if (atomicAdd(&g_blocks_done, 1u) != gridDim.x - 1) return;
  const unsigned long long start = atomicAdd(&g_first_start, 0ull);
  const unsigned long long until = start + (now_ns() - start) * (100 + KG_EXTRA_PERCENT) / 100;
  while (now_ns() < until) {
  }
  g_first_start = ~0ull;
  g_blocks_done = 0;
  __threadfence();
}

__global__ void gemv_rows(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                          __nv_bfloat16* __restrict__ y, int batch, int n, int k) {
  if (KG_EXTRA_PERCENT > 0 && threadIdx.x == 0) atomicMin(&g_first_start, now_ns());
  const int r = blockIdx.x * warps + threadIdx.x / 32;
  if (r < n) one_row(x, w, y, batch, n, k, r, threadIdx.x % 32);
  if (KG_EXTRA_PERCENT > 0) planted_delay();
}

} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out,
                      cudaStream_t stream) {
  if (n_in != 2 || n_out != 1) return 1;
  const int batch = static_cast<int>(in[0].shape[0]), k = static_cast<int>(in[0].shape[1]);
  const int n = static_cast<int>(in[1].shape[0]);
  if (batch < 1 || batch > max_batch || k % 8 != 0 || in[1].shape[1] != k) return 2;
  gemv_rows<<<(n + warps - 1) / warps, 32 * warps, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(in[0].data), static_cast<const __nv_bfloat16*>(in[1].data),
      static_cast<__nv_bfloat16*>(out[0].data), batch, n, k);
  return 0;
}
