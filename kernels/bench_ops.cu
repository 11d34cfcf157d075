#include <cuda_bf16.h>
#include <mma.h>

#include <stdexcept>
#include <utility>

#include "kernels/bench_ops.h"
#include "kernels/layernorm_affine_cuda.h"
#include "gpu/device_buffer.h"

namespace kg {
namespace {

__global__ void fill_kernel(__nv_bfloat16* p, std::size_t n, float scale) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    p[i] = __float2bfloat16(scale * (static_cast<float>((i * 2654435761u) % 1000u) / 500.f - 1.f));
}
__global__ void fill_kernel_f32(float* p, std::size_t n) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    p[i] = static_cast<float>((i * 2654435761u) % 1000u) / 250.f - 2.f;
}

// Softmax over rows of 1024 floats: one block of 256 threads per row, 4 values per thread.
__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int cols) {
  __shared__ float red[32];
  const float* xr = x + static_cast<std::size_t>(blockIdx.x) * cols;
  float* yr = y + static_cast<std::size_t>(blockIdx.x) * cols;
  float m = -INFINITY;
  for (int i = threadIdx.x; i < cols; i += blockDim.x)
    m = fmaxf(m, xr[i]);
  for (int o = 16; o; o >>= 1)
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = m;
  __syncthreads();
  m = red[0];
  for (int w = 1; w < blockDim.x / 32; ++w)
    m = fmaxf(m, red[w]);
  __syncthreads();
  float s = 0.f;
  for (int i = threadIdx.x; i < cols; i += blockDim.x)
    s += __expf(xr[i] - m);
  for (int o = 16; o; o >>= 1)
    s += __shfl_xor_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = s;
  __syncthreads();
  s = 0.f;
  for (int w = 0; w < blockDim.x / 32; ++w)
    s += red[w];
  for (int i = threadIdx.x; i < cols; i += blockDim.x)
    yr[i] = __expf(xr[i] - m) / s;
}

// y = W x, W [rows, cols] bf16 row-major: one warp per row, 16-byte loads, fp32 accumulation.
__global__ void gemv_kernel(const __nv_bfloat16* __restrict__ w,
                            const __nv_bfloat16* __restrict__ x, __nv_bfloat16* __restrict__ y,
                            int rows, int cols) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const uint4* wr = reinterpret_cast<const uint4*>(w + static_cast<std::size_t>(row) * cols);
  const uint4* xv = reinterpret_cast<const uint4*>(x);
  float acc = 0.f;
  for (int i = lane; i < cols / 8; i += 32) {
    const uint4 a = wr[i], b = xv[i];
    const __nv_bfloat162* a2 = reinterpret_cast<const __nv_bfloat162*>(&a);
    const __nv_bfloat162* b2 = reinterpret_cast<const __nv_bfloat162*>(&b);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 fa = __bfloat1622float2(a2[k]), fb = __bfloat1622float2(b2[k]);
      acc = fmaf(fa.x, fb.x, fmaf(fa.y, fb.y, acc));
    }
  }
  for (int o = 16; o; o >>= 1)
    acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (lane == 0) y[row] = __float2bfloat16(acc);
}

// C = A B (all row-major, bf16 in, fp32 accumulate, bf16 out) with WMMA: each warp owns a 64x64
// tile of C as 4x4 fragments and streams A and B from global memory through L2.
__global__ void matmul_kernel(const __nv_bfloat16* __restrict__ a,
                              const __nv_bfloat16* __restrict__ b, __nv_bfloat16* __restrict__ c,
                              int n) {
  using namespace nvcuda;
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int tiles = n / 64;
  const int tm = warp / tiles, tn = warp % tiles;
  if (tm >= tiles) return;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][4];
  for (auto& r : acc)
    for (auto& f : r)
      wmma::fill_fragment(f, 0.f);
  for (int k = 0; k < n; k += 16) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa[4];
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb[4];
    for (int i = 0; i < 4; ++i) {
      wmma::load_matrix_sync(fa[i], a + static_cast<std::size_t>(tm * 64 + i * 16) * n + k, n);
      wmma::load_matrix_sync(fb[i], b + static_cast<std::size_t>(k) * n + tn * 64 + i * 16, n);
    }
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j)
        wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
  }
  // Through a per-warp staging buffer in shared memory: WMMA stores fp32 fragments only.
  __shared__ float stage[4][16 * 16];
  float* st = stage[threadIdx.x / 32];
  const int lane = threadIdx.x % 32;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      wmma::store_matrix_sync(st, acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      for (int e = lane; e < 256; e += 32)
        c[static_cast<std::size_t>(tm * 64 + i * 16 + e / 16) * n + tn * 64 + j * 16 + e % 16] =
            __float2bfloat16(st[e]);
      __syncwarp();
    }
}

class layer_norm_op final : public bench_op {
  static constexpr std::int64_t rows = 8192, cols = 4096;
  device_buffer x_{rows * cols * 2}, w_{cols * 2}, b_{cols * 2}, y_{rows * cols * 2};

public:
  layer_norm_op() {
    KG_CUDA_CHECK(cudaMemset(x_.get(), 0x3c, x_.size())); // ~1.0 halves, varied by byte pattern
    KG_CUDA_CHECK(cudaMemset(w_.get(), 0x3c, w_.size()));
    KG_CUDA_CHECK(cudaMemset(b_.get(), 0, b_.size()));
  }
  std::string name() const override { return "layer_norm 8192x4096 fp16"; }
  std::string kernel_regex() const override { return "layernorm_affine_kernel"; }
  void launch(cudaStream_t s) override {
    launch_layernorm_affine(affine_formula::reference, dtype::float16, x_.get(), w_.get(), b_.get(),
                            y_.get(), rows, cols, 1e-5f, s);
  }
};

class matmul_op final : public bench_op {
  static constexpr int n = 4096;
  device_buffer a_{std::size_t(n) * n * 2}, b_{std::size_t(n) * n * 2}, c_{std::size_t(n) * n * 2};

public:
  matmul_op() {
    fill_kernel<<<1024, 256>>>(static_cast<__nv_bfloat16*>(a_.get()), std::size_t(n) * n, 1.f);
    fill_kernel<<<1024, 256>>>(static_cast<__nv_bfloat16*>(b_.get()), std::size_t(n) * n, 1.f);
    KG_CUDA_CHECK(cudaGetLastError());
    KG_CUDA_CHECK(cudaDeviceSynchronize());
  }
  std::string name() const override { return "matmul 4096^3 bf16 (WMMA)"; }
  std::string kernel_regex() const override { return "matmul_kernel"; }
  void launch(cudaStream_t s) override {
    const int warps = (n / 64) * (n / 64);
    matmul_kernel<<<warps / 4, 128, 0, s>>>(static_cast<const __nv_bfloat16*>(a_.get()),
                                            static_cast<const __nv_bfloat16*>(b_.get()),
                                            static_cast<__nv_bfloat16*>(c_.get()), n);
    KG_CUDA_CHECK(cudaGetLastError());
  }
};

class softmax_op final : public bench_op {
  static constexpr int rows = 64, cols = 1024;
  device_buffer x_{rows * cols * 4}, y_{rows * cols * 4};

public:
  softmax_op() {
    fill_kernel_f32<<<64, 256>>>(static_cast<float*>(x_.get()), rows * cols);
    KG_CUDA_CHECK(cudaGetLastError());
    KG_CUDA_CHECK(cudaDeviceSynchronize());
  }
  std::string name() const override { return "softmax 64x1024 fp32"; }
  std::string kernel_regex() const override { return "softmax_kernel"; }
  void launch(cudaStream_t s) override {
    softmax_kernel<<<rows, 256, 0, s>>>(static_cast<const float*>(x_.get()),
                                        static_cast<float*>(y_.get()), cols);
    KG_CUDA_CHECK(cudaGetLastError());
  }
};

class gemv_op final : public bench_op {
  static constexpr int rows = 9728, cols = 2560;
  device_buffer w_{std::size_t(rows) * cols * 2}, x_{cols * 2}, y_{rows * 2};

public:
  gemv_op() {
    fill_kernel<<<1024, 256>>>(static_cast<__nv_bfloat16*>(w_.get()), std::size_t(rows) * cols,
                               0.05f);
    fill_kernel<<<8, 256>>>(static_cast<__nv_bfloat16*>(x_.get()), cols, 1.f);
    KG_CUDA_CHECK(cudaGetLastError());
    KG_CUDA_CHECK(cudaDeviceSynchronize());
  }
  std::string name() const override { return "gemv 9728x2560 bf16"; }
  std::string kernel_regex() const override { return "gemv_kernel"; }
  void launch(cudaStream_t s) override {
    gemv_kernel<<<rows / 8, 256, 0, s>>>(static_cast<const __nv_bfloat16*>(w_.get()),
                                         static_cast<const __nv_bfloat16*>(x_.get()),
                                         static_cast<__nv_bfloat16*>(y_.get()), rows, cols);
    KG_CUDA_CHECK(cudaGetLastError());
  }
};

// The floor of each timing method: a kernel that does nothing. What a method reports for it is
// what it adds to every kernel (launch, scheduling, its own instrumentation).
__global__ void empty_kernel() {}

class empty_op final : public bench_op {
public:
  std::string name() const override { return "empty kernel 1x32"; }
  std::string kernel_regex() const override { return "empty_kernel"; }
  void launch(cudaStream_t s) override {
    empty_kernel<<<1, 32, 0, s>>>();
    KG_CUDA_CHECK(cudaGetLastError());
  }
};

// Several instances of one op, each with buffers of its own, called in turn: what kernelgate's
// honest timing does with rotating input sets. A kernel whose speed depends on where its buffers
// landed (this matmul's speed differs between processes under every timing method:
// docs/performance.md) then gives each process the mean of several placements instead of one
// draw.
class rotating_op final : public bench_op {
  std::vector<std::unique_ptr<bench_op>> ops_;
  std::size_t next_ = 0;

public:
  explicit rotating_op(std::vector<std::unique_ptr<bench_op>> ops) : ops_(std::move(ops)) {}
  std::string name() const override { return ops_.front()->name(); }
  std::string kernel_regex() const override { return ops_.front()->kernel_regex(); }
  void launch(cudaStream_t s) override {
    ops_[next_]->launch(s);
    next_ = (next_ + 1) % ops_.size();
  }
};

std::unique_ptr<bench_op> make_one(const std::string& name) {
  if (name == "layer_norm") return std::make_unique<layer_norm_op>();
  if (name == "matmul") return std::make_unique<matmul_op>();
  if (name == "softmax") return std::make_unique<softmax_op>();
  if (name == "gemv") return std::make_unique<gemv_op>();
  if (name == "empty") return std::make_unique<empty_op>();
  throw std::invalid_argument("unknown bench op " + name);
}

} // namespace

std::vector<std::string> bench_op_names() {
  return {"layer_norm", "matmul", "softmax", "gemv", "empty"};
}

std::unique_ptr<bench_op> make_bench_op(const std::string& name, int input_sets) {
  if (input_sets <= 1) return make_one(name);
  std::vector<std::unique_ptr<bench_op>> ops;
  for (int i = 0; i < input_sets; ++i)
    ops.push_back(make_one(name));
  return std::make_unique<rotating_op>(std::move(ops));
}

} // namespace kg
