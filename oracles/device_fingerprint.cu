#include "oracles/device_fingerprint.h"

#include <algorithm>
#include <cstring>

#include "gpu/cuda_check.h"

namespace kg {
namespace {

// splitmix64's finalizer: every input bit moves every output bit.
__host__ __device__ inline std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A word's term: its two halves mixed with the word's position (so a moved word counts).
__host__ __device__ inline std::uint64_t term(std::uint64_t lo, std::uint64_t hi, std::uint64_t i) {
  return mix(lo ^ (i * 0x9e3779b97f4a7c15ull)) + mix(hi ^ (i * 0xc2b2ae3d27d4eb4full + 1));
}

// The last bytes (fewer than 16) as one zero-padded word at index `words`.
__host__ __device__ inline void tail_word(const unsigned char* p, std::size_t n, std::uint64_t& lo,
                                          std::uint64_t& hi) {
  unsigned char b[16] = {};
  for (std::size_t k = 0; k < n; ++k)
    b[k] = p[k];
  lo = hi = 0;
  for (int k = 7; k >= 0; --k) {
    lo = (lo << 8) | b[k];
    hi = (hi << 8) | b[k + 8];
  }
}

__global__ void fingerprint_kernel(const ulonglong2* kept, const ulonglong2* other,
                                   std::size_t words, std::size_t tail, fingerprint_result* out) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::uint64_t sum = 0;
  bool differ = false;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < words;
       i += stride) {
    const ulonglong2 k = kept[i];
    sum += term(k.x, k.y, i);
    if (other) {
      const ulonglong2 o = other[i];
      differ |= o.x != k.x || o.y != k.y;
    }
  }
  if (tail && blockIdx.x == 0 && threadIdx.x == 0) {
    const auto* kb = reinterpret_cast<const unsigned char*>(kept + words);
    std::uint64_t lo, hi;
    tail_word(kb, tail, lo, hi);
    sum += term(lo, hi, words);
    if (other) {
      const auto* ob = reinterpret_cast<const unsigned char*>(other + words);
      for (std::size_t k = 0; k < tail; ++k)
        differ |= kb[k] != ob[k];
    }
  }
  for (int d = 16; d > 0; d /= 2) // one atomic per warp
    sum += __shfl_down_sync(0xffffffffu, sum, d);
  if ((threadIdx.x & 31) == 0)
    atomicAdd(reinterpret_cast<unsigned long long*>(&out->fingerprint),
              static_cast<unsigned long long>(sum));
  if (__any_sync(0xffffffffu, differ) && (threadIdx.x & 31) == 0) out->differ = 1;
}

} // namespace

void launch_fingerprint(const void* kept, const void* other, std::size_t bytes,
                        fingerprint_result* device_out, cudaStream_t stream) {
  KG_CUDA_CHECK(cudaMemsetAsync(device_out, 0, sizeof(fingerprint_result), stream));
  const std::size_t words = bytes / 16;
  const int threads = 256;
  const auto blocks = static_cast<unsigned>(
      std::clamp<std::size_t>((std::max<std::size_t>(words, 1) + threads - 1) / threads, 1, 2048));
  fingerprint_kernel<<<blocks, threads, 0, stream>>>(static_cast<const ulonglong2*>(kept),
                                                     static_cast<const ulonglong2*>(other), words,
                                                     bytes % 16, device_out);
  KG_CUDA_CHECK(cudaGetLastError());
}

std::uint64_t host_fingerprint(const void* bytes, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  const std::size_t words = n / 16;
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < words; ++i) {
    std::uint64_t lo, hi;
    std::memcpy(&lo, p + 16 * i, 8);
    std::memcpy(&hi, p + 16 * i + 8, 8);
    sum += term(lo, hi, i);
  }
  if (n % 16) {
    std::uint64_t lo, hi;
    tail_word(p + 16 * words, n % 16, lo, hi);
    sum += term(lo, hi, words);
  }
  return sum;
}

} // namespace kg
