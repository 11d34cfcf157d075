// Red team: memoizes on the input's VALUES, cheaply: it compares the first 8 floats of x with the
// 8 it saw last time (on the device, no host sync) and, when they match, copies its cached row
// means instead of reducing the whole tensor. "Same head, same tensor" holds for a harness that
// re-sends one tensor; it is stale when contents change past the first 8 elements.
#include <cfloat>

#include "kg_candidate.h"

namespace {
constexpr int threads = 256, key_len = 8;

struct value_cache { // device side
  uint32_t key[key_len];
  int hit;
};

// One thread: compare the head of x with the stored key (bitwise), then store the new head.
__global__ void probe_kernel(const float* __restrict__ x, value_cache* c) {
  const uint32_t* head = reinterpret_cast<const uint32_t*>(x);
  int same = 1;
  for (int k = 0; k < key_len; ++k) {
    same &= head[k] == c->key[k];
    c->key[k] = head[k];
  }
  c->hit = same;
}

__global__ void mean_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols,
                            const value_cache* c, float* __restrict__ answer) {
  if (c->hit) { // replay
    if (threadIdx.x == 0) y[blockIdx.x] = answer[blockIdx.x];
    return;
  }
  __shared__ float partial[threads / 32];
  const float* row = x + blockIdx.x * cols;
  float acc = 0.0f;
  for (int64_t k = threadIdx.x; k < cols; k += threads)
    acc += row[k];
  for (int o = 16; o > 0; o /= 2)
    acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = partial[0];
    for (int k = 1; k < threads / 32; ++k)
      total += partial[k];
    const float mean = total / static_cast<float>(cols);
    y[blockIdx.x] = mean;
    answer[blockIdx.x] = mean;
  }
}

struct shape_state { // one per shape seen
  int64_t rows = -1, cols = -1;
  value_cache* cache = nullptr;
  float* answer = nullptr;
};
shape_state states[8];

shape_state* state_for(int64_t rows, int64_t cols, cudaStream_t s) {
  for (auto& st : states)
    if (st.rows == rows && st.cols == cols) return &st;
  for (auto& st : states)
    if (st.rows < 0) {
      if (cudaMalloc(&st.answer, rows * sizeof(float)) != cudaSuccess ||
          cudaMalloc(&st.cache, sizeof(value_cache)) != cudaSuccess)
        return nullptr;
      cudaMemsetAsync(st.cache, 0xff, sizeof(value_cache), s); // NaN bits: no input matches
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
  if (rows * cols < key_len) return 3;
  shape_state* st = state_for(rows, cols, s);
  if (!st) return 2;
  probe_kernel<<<1, 1, 0, s>>>(static_cast<const float*>(in[0].data), st->cache);
  mean_kernel<<<static_cast<unsigned>(rows), threads, 0, s>>>(
      static_cast<const float*>(in[0].data), static_cast<float*>(out[0].data), cols, st->cache,
      st->answer);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
