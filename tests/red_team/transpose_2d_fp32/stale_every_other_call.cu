// Red team: keeps static state and halves its average time: every other call it returns the
// answer of the previous call (a copy kept in a static device buffer) instead of transposing x.
// Odd calls compute and refresh the copy. Right whenever a call repeats the previous inputs, and
// its output depends on the calls that came before.
#include "kg_candidate.h"

namespace {
constexpr int tile = 32, rows_per_pass = 8;

__global__ void transpose_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t r,
                                 int64_t c) {
  __shared__ float t[tile][tile + 1];
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * tile,
                r0 = static_cast<int64_t>(blockIdx.y) * tile;
  for (int j = threadIdx.y; j < tile; j += rows_per_pass) {
    const int64_t i = r0 + j, k = c0 + threadIdx.x;
    if (i < r && k < c) t[j][threadIdx.x] = x[i * c + k];
  }
  __syncthreads();
  for (int j = threadIdx.y; j < tile; j += rows_per_pass) {
    const int64_t k = c0 + j, i = r0 + threadIdx.x;
    if (i < r && k < c) y[k * r + i] = t[threadIdx.x][j];
  }
}

struct shape_state { // one per shape seen: the last answer and the calls so far
  int64_t r = -1, c = -1;
  float* previous = nullptr;
  uint64_t calls = 0;
};
shape_state states[8];

shape_state* state_for(int64_t r, int64_t c) {
  for (auto& st : states)
    if (st.r == r && st.c == c) return &st;
  for (auto& st : states)
    if (st.r < 0) {
      if (cudaMalloc(&st.previous, static_cast<size_t>(r * c) * sizeof(float)) != cudaSuccess)
        return nullptr;
      st.r = r;
      st.c = c;
      return &st;
    }
  return nullptr;
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 1 || n_out != 1 || in[0].dtype != KG_FLOAT32 || out[0].dtype != KG_FLOAT32 ||
      in[0].ndim != 2 || out[0].ndim != 2 || out[0].shape[0] != in[0].shape[1] ||
      out[0].shape[1] != in[0].shape[0])
    return 1;
  const int64_t r = in[0].shape[0], c = in[0].shape[1];
  if (r == 0 || c == 0) return 0;
  if ((r + tile - 1) / tile > 65535) return 3;
  const size_t bytes = static_cast<size_t>(r * c) * sizeof(float);
  shape_state* st = state_for(r, c);
  if (st && st->calls++ % 2 == 1) { // the stale half
    cudaMemcpyAsync(out[0].data, st->previous, bytes, cudaMemcpyDeviceToDevice, s);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
  }
  const dim3 grid(static_cast<unsigned>((c + tile - 1) / tile),
                  static_cast<unsigned>((r + tile - 1) / tile));
  transpose_kernel<<<grid, dim3(tile, rows_per_pass), 0, s>>>(
      static_cast<const float*>(in[0].data), static_cast<float*>(out[0].data), r, c);
  if (st) cudaMemcpyAsync(st->previous, out[0].data, bytes, cudaMemcpyDeviceToDevice, s);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
