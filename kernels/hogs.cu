#include "kernels/hogs.h"

#include "gpu/cuda_check.h"

namespace kg {
namespace {

// Each block streams its slice of the buffer (16-byte loads, stores back an altered value so
// the traffic cannot be elided) until its cycle budget is spent; counts the bytes it moved.
__global__ void memory_hog(uint4* buf, std::size_t words, long long cycles,
                           unsigned long long* moved) {
  const long long start = clock64();
  const std::size_t per_block = words / gridDim.x;
  uint4* mine = buf + per_block * blockIdx.x;
  unsigned long long n = 0;
  while (clock64() - start < cycles) {
    for (std::size_t i = threadIdx.x; i < per_block; i += blockDim.x) {
      uint4 v = mine[i];
      v.x += 1;
      mine[i] = v;
    }
    n += per_block * 32ull; // 16 bytes read and 16 written per word
    if (per_block == 0) break;
  }
  if (threadIdx.x == 0) atomicAdd(moved, n);
}

// Dependent FMA chains in registers, eight per thread, until the cycle budget is spent.
__global__ void compute_hog(long long cycles, unsigned long long* fmas, float seed) {
  const long long start = clock64();
  float a[8];
  for (int k = 0; k < 8; ++k)
    a[k] = seed + static_cast<float>(threadIdx.x + k);
  unsigned long long n = 0;
  while (clock64() - start < cycles) {
#pragma unroll 16
    for (int i = 0; i < 256; ++i)
#pragma unroll
      for (int k = 0; k < 8; ++k)
        a[k] = fmaf(a[k], 0.999999f, 1e-7f);
    n += 256 * 8;
  }
  float s = 0;
  for (int k = 0; k < 8; ++k)
    s += a[k];
  if (s == 12345.678f) fmas[1] = 1; // keeps the chains live; practically never taken
  atomicAdd(fmas, n);
}

} // namespace

contention_hog::contention_hog(kind k, std::size_t bytes) : kind_(k) {
  KG_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&counter_), 2 * sizeof(unsigned long long)));
  if (k == kind::memory_bandwidth) {
    bytes_ = bytes / 16 * 16;
    KG_CUDA_CHECK(cudaMalloc(&buffer_, bytes_));
    KG_CUDA_CHECK(cudaMemset(buffer_, 0, bytes_));
  }
}

contention_hog::~contention_hog() {
  if (buffer_) (void)cudaFree(buffer_);
  if (counter_) (void)cudaFree(counter_);
}

void contention_hog::launch(cudaStream_t stream, double microseconds, double clock_mhz, int sms) {
  const auto cycles = static_cast<long long>(microseconds * clock_mhz);
  KG_CUDA_CHECK(cudaMemsetAsync(counter_, 0, 2 * sizeof(unsigned long long), stream));
  if (kind_ == kind::memory_bandwidth)
    memory_hog<<<sms, 1024, 0, stream>>>(static_cast<uint4*>(buffer_), bytes_ / 16, cycles,
                                         counter_);
  else
    compute_hog<<<sms, 1024, 0, stream>>>(cycles, counter_, 1.0f);
  KG_CUDA_CHECK(cudaGetLastError());
}

double contention_hog::work_done(cudaStream_t stream) {
  unsigned long long n = 0;
  KG_CUDA_CHECK(cudaMemcpyAsync(&n, counter_, sizeof n, cudaMemcpyDeviceToHost, stream));
  KG_CUDA_CHECK(cudaStreamSynchronize(stream));
  return static_cast<double>(n);
}

} // namespace kg
