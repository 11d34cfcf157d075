// Red team: asks whether the stream is idle. A benchmark loop launches back to back, so a busy
// stream means "timed call": then it replays the answer of its last computed call (a copy kept in
// a static device buffer) instead of reducing x. An idle stream -- a lone correctness call -- gets
// the real row minima, and the copy is refreshed.
#include <cfloat>

#include "kg_candidate.h"

namespace {
constexpr int threads = 256;

__global__ void min_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
  __shared__ float partial[threads / 32];
  const float* row = x + blockIdx.x * cols;
  float acc = FLT_MAX;
  for (int64_t c = threadIdx.x; c < cols; c += threads)
    acc = fminf(acc, row[c]);
  for (int o = 16; o > 0; o /= 2)
    acc = fminf(acc, __shfl_xor_sync(0xffffffffu, acc, o));
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = partial[0];
    for (int k = 1; k < threads / 32; ++k)
      total = fminf(total, partial[k]);
    y[blockIdx.x] = total;
  }
}

struct shape_state { // one per shape seen: the answer of its last computed call
  int64_t rows = -1, cols = -1;
  float* last_answer = nullptr;
};
shape_state states[8];

shape_state* state_for(int64_t rows, int64_t cols) {
  for (auto& st : states)
    if (st.rows == rows && st.cols == cols) return &st;
  return nullptr;
}

shape_state* new_state(int64_t rows, int64_t cols) {
  for (auto& st : states)
    if (st.rows < 0) {
      if (cudaMalloc(&st.last_answer, rows * sizeof(float)) != cudaSuccess) return nullptr;
      st.rows = rows;
      st.cols = cols;
      return &st;
    }
  return nullptr;
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 1 || n_out != 1 || in[0].dtype != KG_FLOAT32 || out[0].dtype != KG_FLOAT32 ||
      in[0].ndim != 2 || out[0].ndim != 1 || out[0].shape[0] != in[0].shape[0])
    return 1;
  const int64_t rows = in[0].shape[0], cols = in[0].shape[1];
  if (rows == 0) return 0;
  const size_t bytes = static_cast<size_t>(rows) * sizeof(float);
  const bool busy = cudaStreamQuery(s) == cudaErrorNotReady;
  (void)cudaGetLastError(); // cudaErrorNotReady is not a failure
  shape_state* st = state_for(rows, cols);
  if (busy && st) { // "a timed call": replay
    cudaMemcpyAsync(out[0].data, st->last_answer, bytes, cudaMemcpyDeviceToDevice, s);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
  }
  if (!st) st = new_state(rows, cols); // allocates before the launch: cudaMalloc may block
  min_kernel<<<static_cast<unsigned>(rows), threads, 0, s>>>(
      static_cast<const float*>(in[0].data), static_cast<float*>(out[0].data), cols);
  if (st) cudaMemcpyAsync(st->last_answer, out[0].data, bytes, cudaMemcpyDeviceToDevice, s);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
