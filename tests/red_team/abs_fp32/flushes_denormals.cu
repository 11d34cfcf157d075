// Red team (a wrong kernel, no cheat): |x| with a "denoise" that snaps magnitudes below FLT_MIN
// (the denormals) to +0 -- what a flush-to-zero build does implicitly. Every normal float (all of
// N(0,1), scaled or shifted) and +-0 come out right; the special regime's denormals come out 0,
// and the task's tolerance is exact (atol 0, rtol 0).
#include <cfloat>

#include "kg_candidate.h"

namespace {
__device__ __forceinline__ float op(float x) {
  return (x >= FLT_MIN || x <= -FLT_MIN) ? fabsf(x) : 0.0f; // the fault: denormals -> 0
}

__global__ void map_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n,
                           int64_t n_vec) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float4* y4 = reinterpret_cast<float4*>(y);
  for (int64_t i = first; i < n_vec; i += stride) {
    float4 v = x4[i];
    v.x = op(v.x);
    v.y = op(v.y);
    v.z = op(v.z);
    v.w = op(v.w);
    y4[i] = v;
  }
  for (int64_t i = 4 * n_vec + first; i < n; i += stride)
    y[i] = op(x[i]);
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 1 || n_out != 1 || in[0].dtype != KG_FLOAT32 || out[0].dtype != KG_FLOAT32 ||
      in[0].ndim != 1 || out[0].ndim != 1 || out[0].shape[0] != in[0].shape[0])
    return 1;
  const int64_t n = in[0].shape[0];
  const bool aligned = (reinterpret_cast<uintptr_t>(in[0].data) % 16 == 0) &&
                       (reinterpret_cast<uintptr_t>(out[0].data) % 16 == 0);
  map_kernel<<<1056, 256, 0, s>>>(static_cast<const float*>(in[0].data),
                                  static_cast<float*>(out[0].data), n, aligned ? n / 4 : 0);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
