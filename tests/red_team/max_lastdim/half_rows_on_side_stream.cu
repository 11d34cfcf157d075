// Red team: right values, half of them computed off the books. The first half of the rows is
// reduced on the caller's stream; the second half on a stream of its own (created once) that the
// caller's stream never waits for: a timer on the given stream sees half the work, and a reader
// ordered on that stream may see the second half unwritten.
#include <cfloat>

#include "kg_candidate.h"

namespace {
constexpr int threads = 256;

__global__ void max_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols,
                           int64_t first_row) {
  __shared__ float partial[threads / 32];
  const int64_t r = first_row + blockIdx.x;
  const float* row = x + r * cols;
  float acc = -FLT_MAX;
  for (int64_t c = threadIdx.x; c < cols; c += threads)
    acc = fmaxf(acc, row[c]);
  for (int o = 16; o > 0; o /= 2)
    acc = fmaxf(acc, __shfl_xor_sync(0xffffffffu, acc, o));
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = partial[0];
    for (int k = 1; k < threads / 32; ++k)
      total = fmaxf(total, partial[k]);
    y[r] = total;
  }
}

cudaStream_t side = nullptr;
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 1 || n_out != 1 || in[0].dtype != KG_FLOAT32 || out[0].dtype != KG_FLOAT32 ||
      in[0].ndim != 2 || out[0].ndim != 1 || out[0].shape[0] != in[0].shape[0])
    return 1;
  const int64_t rows = in[0].shape[0], cols = in[0].shape[1];
  if (rows == 0) return 0;
  if (!side && cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking) != cudaSuccess) return 2;
  const int64_t half = rows / 2;
  const float* x = static_cast<const float*>(in[0].data);
  float* y = static_cast<float*>(out[0].data);
  if (half > 0) max_kernel<<<static_cast<unsigned>(half), threads, 0, s>>>(x, y, cols, 0);
  max_kernel<<<static_cast<unsigned>(rows - half), threads, 0, side>>>(x, y, cols, half);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
