#include <cuda_fp16.h>

#include "kernels/layernorm_affine_cuda.h"
#include "gpu/device_buffer.h"

namespace kg {
namespace {

constexpr int block_threads = 128;

__device__ __forceinline__ float load(const float* p, int i) {
  return p[i];
}
__device__ __forceinline__ float load(const __half* p, int i) {
  return __half2float(p[i]);
}
__device__ __forceinline__ void store(float* p, int i, float v) {
  p[i] = v;
}
__device__ __forceinline__ void store(__half* p, int i, float v) {
  p[i] = __float2half_rn(v);
}

// Round a float to T and back: models one eager LibTorch operation producing a T tensor.
template <typename T>
__device__ __forceinline__ float rnd(float v) {
  if constexpr (std::is_same_v<T, __half>)
    return __half2float(__float2half_rn(v));
  else
    return v;
}
// Explicit _rn intrinsics: the compiler must not contract z * w + b into one fma, because the
// reference rounds the product before the addition.
template <typename T>
__device__ __forceinline__ float mul(float a, float b) {
  return rnd<T>(__fmul_rn(a, b));
}
template <typename T>
__device__ __forceinline__ float add(float a, float b) {
  return rnd<T>(__fadd_rn(a, b));
}

__device__ float block_sum(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0.f;
  if (threadIdx.x < 32) {
    total = lane < blockDim.x / 32 ? scratch[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1)
      total += __shfl_xor_sync(0xffffffffu, total, o);
    if (lane == 0) scratch[0] = total;
  }
  __syncthreads();
  total = scratch[0];
  __syncthreads(); // scratch is reused by the next reduction
  return total;
}

template <typename T, affine_formula F>
__global__ void __launch_bounds__(block_threads)
    layernorm_affine_kernel(const T* __restrict__ x, const T* __restrict__ w,
                            const T* __restrict__ b, T* __restrict__ y, int cols, float eps) {
  __shared__ float scratch[32];
  const T* xr = x + static_cast<std::int64_t>(blockIdx.x) * cols;
  T* yr = y + static_cast<std::int64_t>(blockIdx.x) * cols;
  // The value that is normalized: x itself, or x * w + b for the before-normalization fault.
  auto u = [&](int i) {
    float v = load(xr, i);
    if constexpr (F == affine_formula::affine_before_norm)
      v = add<T>(mul<T>(v, load(w, i)), load(b, i));
    return v;
  };
  float s = 0.f;
  for (int i = threadIdx.x; i < cols; i += blockDim.x)
    s += u(i);
  const float mean = block_sum(s, scratch) / static_cast<float>(cols);
  float q = 0.f;
  for (int i = threadIdx.x; i < cols; i += blockDim.x) {
    const float d = u(i) - mean;
    q += d * d;
  }
  const float rstd = 1.f / sqrtf(block_sum(q, scratch) / static_cast<float>(cols) + eps);
  for (int i = threadIdx.x; i < cols; i += blockDim.x) {
    const float z = rnd<T>((u(i) - mean) * rstd);
    float out = z;
    if constexpr (F == affine_formula::reference)
      out = add<T>(mul<T>(z, load(w, i)), load(b, i));
    else if constexpr (F == affine_formula::omit_weight)
      out = add<T>(z, load(b, i));
    else if constexpr (F == affine_formula::omit_bias)
      out = mul<T>(z, load(w, i));
    else if constexpr (F == affine_formula::scalar_affine)
      out = add<T>(mul<T>(z, load(w, 0)), load(b, 0));
    else if constexpr (F == affine_formula::affine_twice)
      out = add<T>(mul<T>(add<T>(mul<T>(z, load(w, i)), load(b, i)), load(w, i)), load(b, i));
    store(yr, i, out);
  }
}

// Independent implementation: warp per row, Welford, fused affine, one rounding.
template <typename T>
__global__ void layernorm_independent_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                             const T* __restrict__ b, T* __restrict__ y, int rows,
                                             int cols, float eps) {
  const int warps_per_block = blockDim.x / 32;
  const int row = blockIdx.x * warps_per_block + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return; // whole warps exit together: the shuffles below stay converged
  const T* xr = x + static_cast<std::int64_t>(row) * cols;
  T* yr = y + static_cast<std::int64_t>(row) * cols;
  float n = 0.f, mean = 0.f, m2 = 0.f;
  for (int i = lane; i < cols; i += 32) {
    const float v = load(xr, i);
    n += 1.f;
    const float d = v - mean;
    mean += d / n;
    m2 += d * (v - mean);
  }
  for (int o = 16; o > 0; o >>= 1) { // Chan et al.: merge (n, mean, m2) of two partitions
    const float n2 = __shfl_xor_sync(0xffffffffu, n, o);
    const float mean2 = __shfl_xor_sync(0xffffffffu, mean, o);
    const float m22 = __shfl_xor_sync(0xffffffffu, m2, o);
    const float nt = n + n2;
    if (nt > 0.f) {
      const float d = mean2 - mean;
      mean += d * (n2 / nt);
      m2 += m22 + d * d * (n * n2 / nt);
    }
    n = nt;
  }
  const float rstd = rsqrtf(m2 / static_cast<float>(cols) + eps);
  for (int i = lane; i < cols; i += 32)
    store(yr, i, fmaf((load(xr, i) - mean) * rstd, load(w, i), load(b, i)));
}

template <typename T, affine_formula F>
void launch_typed(const void* x, const void* w, const void* b, void* y, std::int64_t rows,
                  std::int64_t cols, float eps, cudaStream_t s) {
  layernorm_affine_kernel<T, F><<<static_cast<unsigned>(rows), block_threads, 0, s>>>(
      static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(b),
      static_cast<T*>(y), static_cast<int>(cols), eps);
}

template <typename T>
void launch_formula(affine_formula f, const void* x, const void* w, const void* b, void* y,
                    std::int64_t rows, std::int64_t cols, float eps, cudaStream_t s) {
  switch (f) {
  case affine_formula::reference:
    return launch_typed<T, affine_formula::reference>(x, w, b, y, rows, cols, eps, s);
  case affine_formula::omit_all:
    return launch_typed<T, affine_formula::omit_all>(x, w, b, y, rows, cols, eps, s);
  case affine_formula::omit_weight:
    return launch_typed<T, affine_formula::omit_weight>(x, w, b, y, rows, cols, eps, s);
  case affine_formula::omit_bias:
    return launch_typed<T, affine_formula::omit_bias>(x, w, b, y, rows, cols, eps, s);
  case affine_formula::scalar_affine:
    return launch_typed<T, affine_formula::scalar_affine>(x, w, b, y, rows, cols, eps, s);
  case affine_formula::affine_twice:
    return launch_typed<T, affine_formula::affine_twice>(x, w, b, y, rows, cols, eps, s);
  case affine_formula::affine_before_norm:
    return launch_typed<T, affine_formula::affine_before_norm>(x, w, b, y, rows, cols, eps, s);
  }
}

void check_dtype(dtype type) {
  if (type != dtype::float32 && type != dtype::float16)
    throw std::invalid_argument("CUDA LayerNorm kernels take float32 or float16");
}

} // namespace

void launch_layernorm_affine(affine_formula f, dtype type, const void* x, const void* w,
                             const void* b, void* y, std::int64_t rows, std::int64_t cols,
                             float eps, cudaStream_t stream) {
  check_dtype(type);
  if (rows <= 0 || cols <= 0) return;
  if (type == dtype::float32)
    launch_formula<float>(f, x, w, b, y, rows, cols, eps, stream);
  else
    launch_formula<__half>(f, x, w, b, y, rows, cols, eps, stream);
  KG_CUDA_CHECK(cudaGetLastError());
}

void launch_layernorm_independent(dtype type, const void* x, const void* w, const void* b, void* y,
                                  std::int64_t rows, std::int64_t cols, float eps,
                                  cudaStream_t stream) {
  check_dtype(type);
  if (rows <= 0 || cols <= 0) return;
  constexpr int warps = 4;
  const unsigned grid = static_cast<unsigned>((rows + warps - 1) / warps);
  if (type == dtype::float32)
    layernorm_independent_kernel<float><<<grid, warps * 32, 0, stream>>>(
        static_cast<const float*>(x), static_cast<const float*>(w), static_cast<const float*>(b),
        static_cast<float*>(y), static_cast<int>(rows), static_cast<int>(cols), eps);
  else
    layernorm_independent_kernel<__half><<<grid, warps * 32, 0, stream>>>(
        static_cast<const __half*>(x), static_cast<const __half*>(w), static_cast<const __half*>(b),
        static_cast<__half*>(y), static_cast<int>(rows), static_cast<int>(cols), eps);
  KG_CUDA_CHECK(cudaGetLastError());
}

host_tensor run_layernorm_cuda(affine_formula f, bool independent, const layernorm_inputs& in,
                               double eps) {
  const std::int64_t rows = in.x.shape.at(0), cols = in.x.shape.at(1);
  device_buffer x(in.x.bytes.size()), w(in.weight.bytes.size()), b(in.bias.bytes.size()),
      y(in.x.bytes.size());
  KG_CUDA_CHECK(cudaMemcpy(x.get(), in.x.bytes.data(), x.size(), cudaMemcpyHostToDevice));
  KG_CUDA_CHECK(cudaMemcpy(w.get(), in.weight.bytes.data(), w.size(), cudaMemcpyHostToDevice));
  KG_CUDA_CHECK(cudaMemcpy(b.get(), in.bias.bytes.data(), b.size(), cudaMemcpyHostToDevice));
  // Poison the output so a kernel that writes nothing cannot pass on stale memory.
  KG_CUDA_CHECK(cudaMemset(y.get(), 0xff, y.size()));
  if (independent)
    launch_layernorm_independent(in.x.type, x.get(), w.get(), b.get(), y.get(), rows, cols,
                                 static_cast<float>(eps), nullptr);
  else
    launch_layernorm_affine(f, in.x.type, x.get(), w.get(), b.get(), y.get(), rows, cols,
                            static_cast<float>(eps), nullptr);
  host_tensor out(in.x.type, in.x.shape);
  KG_CUDA_CHECK(cudaMemcpy(out.bytes.data(), y.get(), y.size(), cudaMemcpyDeviceToHost));
  return out;
}

} // namespace kg
