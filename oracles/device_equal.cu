#include "oracles/device_equal.h"

#include <algorithm>
#include <cstdint>

#include "gpu/cuda_check.h"
#include "gpu/cuda_raii.h"

namespace kg {
namespace {

// 16-byte words where both buffers allow it (cudaMalloc's are 256-byte aligned), then bytes.
__global__ void differ_kernel(const unsigned char* a, const unsigned char* b, std::size_t words,
                              std::size_t bytes, unsigned int* differ) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const auto* wa = reinterpret_cast<const uint4*>(a);
  const auto* wb = reinterpret_cast<const uint4*>(b);
  bool d = false;
  for (std::size_t i = first; i < words && !d; i += stride) {
    const uint4 x = wa[i], y = wb[i];
    d = x.x != y.x || x.y != y.y || x.z != y.z || x.w != y.w;
  }
  for (std::size_t i = words * 16 + first; i < bytes && !d; i += stride)
    d = a[i] != b[i];
  if (d) *differ = 1;
}

// Any byte of a that is not `value`: 16-byte words first (a is 16-byte aligned), then bytes.
__global__ void not_value_kernel(const unsigned char* a, unsigned char value, std::size_t words,
                                 std::size_t bytes, unsigned int* differ) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const auto* wa = reinterpret_cast<const uint4*>(a);
  const unsigned int v = 0x01010101u * value;
  bool d = false;
  for (std::size_t i = first; i < words && !d; i += stride) {
    const uint4 x = wa[i];
    d = x.x != v || x.y != v || x.z != v || x.w != v;
  }
  for (std::size_t i = words * 16 + first; i < bytes && !d; i += stride)
    d = a[i] != value;
  if (d) *differ = 1;
}

unsigned blocks_for(std::size_t words, int threads) {
  return static_cast<unsigned>(
      std::clamp<std::size_t>((std::max<std::size_t>(words, 1) + threads - 1) / threads, 1, 1024));
}

} // namespace

void launch_not_value(const void* p, std::size_t bytes, unsigned char value, unsigned int* flag,
                      cudaStream_t stream) {
  const std::size_t words = reinterpret_cast<std::uintptr_t>(p) % 16 == 0 ? bytes / 16 : 0;
  const int threads = 256;
  not_value_kernel<<<blocks_for(words, threads), threads, 0, stream>>>(
      static_cast<const unsigned char*>(p), value, words, bytes, flag);
  KG_CUDA_CHECK(cudaGetLastError());
}

void launch_differ(const void* a, const void* b, std::size_t bytes, unsigned int* flag,
                   cudaStream_t stream) {
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  const std::size_t words = aligned(a) && aligned(b) ? bytes / 16 : 0;
  const int threads = 256;
  differ_kernel<<<blocks_for(words, threads), threads, 0, stream>>>(
      static_cast<const unsigned char*>(a), static_cast<const unsigned char*>(b), words, bytes,
      flag);
  KG_CUDA_CHECK(cudaGetLastError());
}

bool device_all_bytes(const void* p, std::size_t bytes, unsigned char value, cudaStream_t stream) {
  thread_local mapped_host<unsigned int> out; // page-locked once per thread
  *out.host() = 0;
  launch_not_value(p, bytes, value, out.device(), stream);
  KG_CUDA_CHECK(cudaStreamSynchronize(stream));
  return *out.host() == 0;
}

bool device_equal(const void* a, const void* b, std::size_t bytes, cudaStream_t stream) {
  thread_local mapped_host<unsigned int> out; // page-locked once per thread
  *out.host() = 0;
  launch_differ(a, b, bytes, out.device(), stream);
  KG_CUDA_CHECK(cudaStreamSynchronize(stream));
  return *out.host() == 0;
}

} // namespace kg
