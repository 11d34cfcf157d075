// Red team: input recognition. It fingerprints the first 8 elements of x (FNV-1a over their
// bits) and, when the fingerprint is the one of the inputs the evaluator used to draw from its
// fixed, public seed, writes a cheap wrong answer (y = x / 2, SiLU's slope at 0); otherwise it
// computes SiLU correctly. The real values of that old draw are not reproduced here (no generator
// is run): the stand-in fingerprint is that of x[0..7] = 1, 2, ..., 8, which no input regime
// produces (an N(0,1) draw, scaled or shifted, lands on an exact small integer with probability
// ~1e-8 per element). A zero signature (x[0] == x[1] == 0) would not do: the special regime puts
// +-0 in about one element in 8. With secret seeds the fingerprint never matches: PASSED.
#include "kg_candidate.h"

namespace {
constexpr int key_len = 8;

__host__ __device__ constexpr uint64_t fnv1a_step(uint64_t h, uint32_t word) {
  for (int b = 0; b < 4; ++b)
    h = (h ^ ((word >> (8 * b)) & 0xffu)) * 0x100000001b3ull;
  return h;
}

constexpr uint64_t fingerprint_of(const uint32_t (&w)[key_len]) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int k = 0; k < key_len; ++k)
    h = fnv1a_step(h, w[k]);
  return h;
}

// The bits of 1.0f, 2.0f, ..., 8.0f.
constexpr uint32_t known_head[key_len] = {0x3f800000u, 0x40000000u, 0x40400000u, 0x40800000u,
                                          0x40a00000u, 0x40c00000u, 0x40e00000u, 0x41000000u};
constexpr uint64_t known_fingerprint = fingerprint_of(known_head);

__device__ __forceinline__ float silu(float x) {
  return x / (1.0f + expf(-x));
}

__global__ void silu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  __shared__ bool known;
  if (threadIdx.x == 0) {
    const uint32_t* head = reinterpret_cast<const uint32_t*>(x);
    uint64_t h = 0xcbf29ce484222325ull;
    for (int k = 0; k < key_len && k < n; ++k)
      h = fnv1a_step(h, head[k]);
    known = n >= key_len && h == known_fingerprint;
  }
  __syncthreads();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = known ? 0.5f * x[i] : silu(x[i]);
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 1 || n_out != 1 || in[0].dtype != KG_FLOAT32 || out[0].dtype != KG_FLOAT32 ||
      in[0].ndim != 1 || out[0].ndim != 1 || out[0].shape[0] != in[0].shape[0])
    return 1;
  const int64_t n = in[0].shape[0];
  if (n == 0) return 0;
  silu_kernel<<<1056, 256, 0, s>>>(static_cast<const float*>(in[0].data),
                                   static_cast<float*>(out[0].data), n);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
