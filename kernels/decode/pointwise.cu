// The decode step's elementwise kernels (SiLU gate, embedding gather), the greedy argmax, and the
// seeded fills the engine draws its weights and synthetic KV cache from.
#include <cmath>
#include <cstdint>

#include "kernels/decode/decode_kernels.h"
#include "kernels/decode/decode_math.cuh"
#include "kernels/decode/programmatic_launch.cuh"

namespace kg::decode {
namespace {

constexpr int threads = 256;

__global__ void silu_gate_kernel(const __nv_bfloat16* __restrict__ gu,
                                 __nv_bfloat16* __restrict__ y, int rows, int inter) {
  // Programmatic launches (programmatic_launch.cuh): wait for the GEMV ahead, then let the next
  // one (the down projection) be scheduled at once, onto the GPU that GEMV has left: its blocks
  // issue their first weight loads while this kernel runs.
  pdl::wait();
  pdl::allow_dependents();
  const int t = blockIdx.x * threads + threadIdx.x;
  if (t >= rows * inter) return;
  const int b = t / inter, i = t % inter;
  const std::size_t row = static_cast<std::size_t>(b) * 2 * inter;
  const float g = __bfloat162float(gu[row + i]), u = __bfloat162float(gu[row + inter + i]);
  y[t] = math::silu_gate(g, u);
}

// Thread per 16 bytes of an output row.
__global__ void gather_kernel(const __nv_bfloat16* __restrict__ table, const int* __restrict__ tok,
                              __nv_bfloat16* __restrict__ out, int rows, int cols) {
  pdl::wait();
  pdl::allow_dependents(); // as silu_gate_kernel
  const int vecs = cols / 8;
  const int t = blockIdx.x * threads + threadIdx.x;
  if (t >= rows * vecs) return;
  const int b = t / vecs, e = (t % vecs) * 8;
  *reinterpret_cast<uint4*>(out + static_cast<std::size_t>(b) * cols + e) =
      *reinterpret_cast<const uint4*>(table + static_cast<std::size_t>(tok[b]) * cols + e);
}

constexpr int argmax_threads = 1024;

// (value, index) with the larger value winning and, on equal values, the smaller index.
__device__ __forceinline__ void take_better(float& v, int& i, float ov, int oi) {
  if (ov > v || (ov == v && oi < i)) {
    v = ov;
    i = oi;
  }
}

// One block per row: each thread scans its elements in increasing index order, then a
// fixed-order tree. Which thread sees which element does not change the answer (the first index
// of the maximum: take_better is a total order on (value, -index)). A row of whole 16-byte
// chunks is read 8 chunks a thread at a time, all in flight (docs/performance.md has what the
// first form, one 2-byte load after another, cost).
__global__ void argmax_kernel(const __nv_bfloat16* __restrict__ x, int* __restrict__ out, int cols,
                              bool vectors) {
  __shared__ float sv[argmax_threads / 32];
  __shared__ int si[argmax_threads / 32];
  pdl::wait(); // the last kernel of a step: nothing follows it programmatically
  const __nv_bfloat16* row = x + static_cast<std::size_t>(blockIdx.x) * cols;
  float best = -INFINITY;
  int at = cols; // loses every tie; stays when the row is all NaN or -inf
  const auto consider = [&](float v, int c) {
    if (v > best || (at == cols && v == best)) { // NaN compares false: never taken
      best = v;
      at = c;
    }
  };
  const int t = static_cast<int>(threadIdx.x);
  if (vectors) {
    constexpr int in_flight = 8;
    const uint4* r4 = reinterpret_cast<const uint4*>(row);
    const int c8 = cols / 8;
    for (int c0 = t; c0 < c8; c0 += in_flight * argmax_threads) {
      uint4 v[in_flight];
#pragma unroll
      for (int u = 0; u < in_flight; ++u) {
        const int c = c0 + u * argmax_threads;
        v[u] = c < c8 ? r4[c] : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < in_flight; ++u) {
        const int c = c0 + u * argmax_threads;
        if (c >= c8) break;
        float f[8];
        math::unpack8(v[u], f);
#pragma unroll
        for (int e = 0; e < 8; ++e)
          consider(f[e], 8 * c + e);
      }
    }
  } else {
    for (int c = t; c < cols; c += argmax_threads)
      consider(__bfloat162float(row[c]), c);
  }
  for (int o = 16; o > 0; o /= 2)
    take_better(best, at, __shfl_xor_sync(0xffffffffu, best, o),
                __shfl_xor_sync(0xffffffffu, at, o));
  if (threadIdx.x % 32 == 0) {
    sv[threadIdx.x / 32] = best;
    si[threadIdx.x / 32] = at;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < argmax_threads / 32; ++w)
      take_better(best, at, sv[w], si[w]);
    out[blockIdx.x] = at < cols ? at : 0;
  }
}

__device__ __forceinline__ std::uint64_t mix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform of mean 0 and variance 1 (range +-sqrt(3)) for counter i of stream (seed, id).
__device__ __forceinline__ float unit_uniform(std::uint64_t key, std::uint64_t i) {
  const std::uint64_t u = mix64(key + i);
  const float f = (static_cast<float>(u >> 40) + 0.5f) * (1.0f / 16777216.0f); // (0, 1)
  return (f - 0.5f) * 3.4641016151377544f;                                     // sqrt(12)
}

__host__ __device__ inline std::uint64_t stream_key(std::uint64_t seed, std::uint64_t id) {
  // Two rounds of splitmix's finalizer, written out so host and device agree without a call.
  std::uint64_t z = seed * 0x9e3779b97f4a7c15ull ^ (id + 0x632be59bd9b4e019ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__global__ void fill_kernel(__nv_bfloat16* __restrict__ x, std::size_t n, std::uint64_t key,
                            float mean, float sd) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * threads;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * threads + threadIdx.x; i < n;
       i += stride)
    x[i] = __float2bfloat16(mean + sd * unit_uniform(key, i));
}

// Thread per (kv head, position, dim) of one block; K and V from their own streams.
__global__ void fill_kv_kernel(__nv_bfloat16* __restrict__ kc, __nv_bfloat16* __restrict__ vc,
                               int kv_start, int context, int kv_heads, int head_dim, int capacity,
                               std::uint64_t k_key, std::uint64_t v_key, float k_sd, float v_sd) {
  const std::size_t n = static_cast<std::size_t>(kv_heads) * context * head_dim;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * threads;
  for (std::size_t t = static_cast<std::size_t>(blockIdx.x) * threads + threadIdx.x; t < n;
       t += stride) {
    const std::size_t d = t % head_dim, p = (t / head_dim) % context,
                      h = t / (static_cast<std::size_t>(head_dim) * context);
    // The counter names (head, position, dim) only: not the block, not its capacity.
    const std::uint64_t i = (h << 40) | (p << 16) | d;
    const std::size_t at =
        (static_cast<std::size_t>(kv_start) * kv_heads + h * capacity + p) * head_dim + d;
    kc[at] = __float2bfloat16(k_sd * unit_uniform(k_key, i));
    vc[at] = __float2bfloat16(v_sd * unit_uniform(v_key, i));
  }
}

int fill_blocks(std::size_t n) {
  const std::size_t b = (n + threads - 1) / threads;
  return static_cast<int>(b < 4096 ? (b > 0 ? b : 1) : 4096);
}

} // namespace

cudaError_t launch_silu_gate_mul(const __nv_bfloat16* gate_up, __nv_bfloat16* out, int rows,
                                 int inter, cudaStream_t s, bool programmatic) {
  if (rows < 1 || inter < 1 || !gate_up || !out) return cudaErrorInvalidValue;
  const int n = rows * inter;
  return pdl::launch(silu_gate_kernel, dim3((n + threads - 1) / threads), dim3(threads), 0, s,
                     programmatic, 1u, gate_up, out, rows, inter);
}

cudaError_t launch_embedding_gather(const __nv_bfloat16* table, const int* tokens,
                                    __nv_bfloat16* out, int rows, int cols, cudaStream_t s,
                                    bool programmatic) {
  if (rows < 1 || cols < 8 || cols % 8 || !table || !tokens || !out) return cudaErrorInvalidValue;
  const int n = rows * cols / 8;
  return pdl::launch(gather_kernel, dim3((n + threads - 1) / threads), dim3(threads), 0, s,
                     programmatic, 1u, table, tokens, out, rows, cols);
}

cudaError_t launch_argmax(const __nv_bfloat16* x, int* out, int rows, int cols, cudaStream_t s,
                          bool programmatic) {
  if (rows < 1 || cols < 1 || !x || !out) return cudaErrorInvalidValue;
  const bool vectors = cols % 8 == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0;
  return pdl::launch(argmax_kernel, dim3(rows), dim3(argmax_threads), 0, s, programmatic, 1u, x,
                     out, cols, vectors);
}

cudaError_t launch_fill_uniform(__nv_bfloat16* x, std::size_t n, std::uint64_t seed,
                                std::uint64_t stream_id, float mean, float sd, cudaStream_t s) {
  if (!x && n) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  fill_kernel<<<fill_blocks(n), threads, 0, s>>>(x, n, stream_key(seed, stream_id), mean, sd);
  return cudaGetLastError();
}

cudaError_t launch_fill_kv_synthetic(__nv_bfloat16* k_cache, __nv_bfloat16* v_cache, int kv_start,
                                     int kv_capacity, int context, int kv_heads, int head_dim,
                                     std::uint64_t seed, int layer, float k_sd, float v_sd,
                                     cudaStream_t s) {
  if (!k_cache || !v_cache || kv_start < 0 || context < 0 || context > kv_capacity ||
      kv_heads < 1 || head_dim < 1 || head_dim > 65535 || layer < 0)
    return cudaErrorInvalidValue;
  if (context == 0) return cudaSuccess;
  // Streams 2^32 + 2 layer (+1) for K (V): apart from any weight stream id the engine uses.
  const std::uint64_t k_id = (std::uint64_t{1} << 32) + 2 * static_cast<std::uint64_t>(layer);
  const std::size_t n = static_cast<std::size_t>(kv_heads) * context * head_dim;
  fill_kv_kernel<<<fill_blocks(n), threads, 0, s>>>(k_cache, v_cache, kv_start, context, kv_heads,
                                                    head_dim, kv_capacity, stream_key(seed, k_id),
                                                    stream_key(seed, k_id + 1), k_sd, v_sd);
  return cudaGetLastError();
}

} // namespace kg::decode
