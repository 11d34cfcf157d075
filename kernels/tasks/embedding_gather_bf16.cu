// Task embedding_gather_bf16: y[t, :] = table[index[t], :], table (V, D) bfloat16, index (T)
// int64. One block per output row (grid-stride over rows): 16-byte copies where D is a multiple
// of 8 and the buffers are aligned, element copies otherwise. An index outside [0, V) writes a
// row of NaN (torch raises): never a silent wrong row and never an out-of-bounds read.
#include <cuda_bf16.h>

#include "kg_candidate.h"

namespace {
using bf16 = __nv_bfloat16;
constexpr int threads = 128;

__global__ void gather_kernel(const bf16* __restrict__ table, const int64_t* __restrict__ index,
                              bf16* __restrict__ y, int64_t tokens, int64_t vocab, int64_t d,
                              bool vec) {
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const int64_t r = index[t];
    const bool ok = r >= 0 && r < vocab;
    if (vec) {
      const uint4* src = reinterpret_cast<const uint4*>(table + r * d);
      uint4* dst = reinterpret_cast<uint4*>(y + t * d);
      const uint4 nan8 = make_uint4(0x7fc07fc0u, 0x7fc07fc0u, 0x7fc07fc0u, 0x7fc07fc0u);
      for (int64_t v = threadIdx.x; v < d / 8; v += threads)
        dst[v] = ok ? src[v] : nan8;
    } else {
      const bf16 nan = __float2bfloat16(__int_as_float(0x7fc00000));
      for (int64_t c = threadIdx.x; c < d; c += threads)
        y[t * d + c] = ok ? table[r * d + c] : nan;
    }
  }
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 2 || n_out != 1 || in[0].dtype != KG_BFLOAT16 || in[1].dtype != KG_INT64 ||
      out[0].dtype != KG_BFLOAT16 || in[0].ndim != 2 || in[1].ndim != 1 || out[0].ndim != 2)
    return 1;
  const int64_t vocab = in[0].shape[0], d = in[0].shape[1], tokens = in[1].shape[0];
  if (out[0].shape[0] != tokens || out[0].shape[1] != d) return 1;
  if (tokens == 0 || d == 0) return 0;
  const bool vec = d % 8 == 0 && reinterpret_cast<uintptr_t>(in[0].data) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(out[0].data) % 16 == 0;
  const unsigned blocks = static_cast<unsigned>(tokens < 8192 ? tokens : 8192);
  gather_kernel<<<blocks, threads, 0, s>>>(static_cast<const bf16*>(in[0].data),
                                           static_cast<const int64_t*>(in[1].data),
                                           static_cast<bf16*>(out[0].data), tokens, vocab, d, vec);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
