// See gemv_reference.h.
#include "bench/gemv_reference.h"

#include "gpu/cuda_check.h"
#include "kernels/decode/mbarrier.cuh"

namespace kg {
namespace {

__device__ std::uint32_t mix32(std::uint64_t v) {
  v ^= v >> 33;
  v *= 0xff51afd7ed558ccdull;
  v ^= v >> 33;
  v *= 0xc4ceb9fe1a85ec53ull;
  v ^= v >> 33;
  return static_cast<std::uint32_t>(v);
}

__global__ void fill_kernel(__nv_bfloat16* p, std::size_t count, std::uint32_t seed, float scale) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const float u = static_cast<float>(mix32((static_cast<std::uint64_t>(seed) << 40) ^ i)) *
                    (1.0f / 4294967296.0f); // [0, 1)
    p[i] = __float2bfloat16((2.0f * u - 1.0f) * scale);
  }
}

// Thread t computes batch row t % batch of weight row t / batch: the batch rows of one weight row
// are neighbours, so a warp's weight loads coincide.
__global__ void reference_kernel(const __nv_bfloat16* x, const __nv_bfloat16* w, float* y,
                                 int batch, int n, int k) {
  const long long t = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= static_cast<long long>(batch) * n) return;
  const int b = static_cast<int>(t % batch), r = static_cast<int>(t / batch);
  const __nv_bfloat16* xr = x + static_cast<std::size_t>(b) * k;
  const __nv_bfloat16* wr = w + static_cast<std::size_t>(r) * k;
  float acc = 0.0f;
  for (int i = 0; i < k; ++i)
    acc = fmaf(__bfloat162float(wr[i]), __bfloat162float(xr[i]), acc);
  y[static_cast<std::size_t>(b) * n + r] = acc;
}

// Grid-stride over 16-byte chunks, UNROLL independent loads per thread per step.
template <int UNROLL>
__global__ void __launch_bounds__(256)
    read_kernel(const uint4* p, std::size_t chunks, unsigned* sink) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * 256;
  unsigned acc = 0;
  std::size_t i = static_cast<std::size_t>(blockIdx.x) * 256 + threadIdx.x;
  for (; i + (UNROLL - 1) * stride < chunks; i += UNROLL * stride) {
    uint4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
      v[u] = __ldcs(p + i + u * stride);
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
      acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < chunks; i += stride) {
    const uint4 v = __ldcs(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  for (int o = 16; o > 0; o /= 2)
    acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
  if (threadIdx.x == 0) sink[blockIdx.x] = acc;
}

// Block b reads the b-th contiguous slice of `per` bytes (a multiple of 16) with bulk async
// copies into shared memory, up to `round` bytes a round: one thread asks for the whole round in
// 16 KB copies completing on one barrier, so every byte of it is in flight at once, then every
// thread xors the words it owns.
__global__ void __launch_bounds__(256)
    read_bulk_kernel(const unsigned char* p, std::size_t bytes, std::size_t per, unsigned round,
                     unsigned* sink) {
  extern __shared__ __align__(16) unsigned char buf[];
  __shared__ __align__(8) unsigned long long bar;
  if (threadIdx.x == 0) {
    kg::decode::mbar_init(&bar, 1);
    kg::decode::mbar_init_fence();
  }
  __syncthreads();
  const std::size_t begin = static_cast<std::size_t>(blockIdx.x) * per;
  const std::size_t end = begin + per < bytes ? begin + per : bytes;
  unsigned acc = 0, parity = 0;
  for (std::size_t at = begin; at < end; at += round, parity ^= 1u) {
    const unsigned n = static_cast<unsigned>(end - at < round ? end - at : round);
    if (threadIdx.x == 0) {
      kg::decode::mbar_arrive_expect_tx(&bar, n);
      for (unsigned o = 0; o < n; o += 16384)
        kg::decode::bulk_copy(buf + o, p + at + o, n - o < 16384 ? n - o : 16384, &bar);
    }
    kg::decode::mbar_wait(&bar, parity);
    for (unsigned i = threadIdx.x * 16; i < n; i += 256 * 16) {
      const uint4 v = *reinterpret_cast<const uint4*>(buf + i);
      acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    __syncthreads(); // everyone is done with buf before the next round overwrites it
  }
  for (int o = 16; o > 0; o /= 2)
    acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
  if (threadIdx.x == 0) sink[blockIdx.x] = acc;
}

} // namespace

void read_bulk(const void* p, std::size_t bytes, unsigned* sink, int blocks, cudaStream_t s) {
  const std::size_t per = (bytes / 16 + blocks - 1) / blocks * 16;
  const unsigned round = static_cast<unsigned>(per < 96 * 1024 ? per : 96 * 1024);
  KG_CUDA_CHECK(cudaFuncSetAttribute(read_bulk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(round)));
  read_bulk_kernel<<<blocks, 256, round, s>>>(static_cast<const unsigned char*>(p), bytes, per,
                                              round, sink);
  KG_CUDA_CHECK(cudaGetLastError());
}

void read_stream(const void* p, std::size_t bytes, unsigned* sink, int blocks, int unroll,
                 cudaStream_t s) {
  const auto* q = static_cast<const uint4*>(p);
  const std::size_t chunks = bytes / 16;
  switch (unroll) {
  case 4:
    read_kernel<4><<<blocks, 256, 0, s>>>(q, chunks, sink);
    break;
  case 8:
    read_kernel<8><<<blocks, 256, 0, s>>>(q, chunks, sink);
    break;
  default:
    read_kernel<16><<<blocks, 256, 0, s>>>(q, chunks, sink);
  }
  KG_CUDA_CHECK(cudaGetLastError());
}

void fill_bf16_hash(__nv_bfloat16* p, std::size_t count, std::uint32_t seed, float scale,
                    cudaStream_t s) {
  fill_kernel<<<1024, 256, 0, s>>>(p, count, seed, scale);
  KG_CUDA_CHECK(cudaGetLastError());
}

void gemv_reference_f32(const __nv_bfloat16* x, const __nv_bfloat16* w, float* y, int batch, int n,
                        int k, cudaStream_t s) {
  const long long threads = static_cast<long long>(batch) * n;
  const unsigned blocks = static_cast<unsigned>((threads + 255) / 256);
  reference_kernel<<<blocks, 256, 0, s>>>(x, w, y, batch, n, k);
  KG_CUDA_CHECK(cudaGetLastError());
}

} // namespace kg
