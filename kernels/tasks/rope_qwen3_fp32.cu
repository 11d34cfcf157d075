// Task rope_qwen3_fp32: rotary embedding of x (B, H, S, D), float32, Qwen3/HF convention: theta
// 1e6, rotate-half pairs (i, i + D/2), positions 0..S-1. A thread owns one (position, i) pair
// for 8 heads: it computes the angle s * theta^(-2i/D) and its sine and cosine once, in double
// (an fp32 angle is off by up to ~|angle| x 1e-7 rad), and rotates the pair in each head.
#include "kg_candidate.h"

namespace {
constexpr int threads = 256, heads_per_thread = 8;
constexpr double log_theta = 13.815510557964274; // ln(1e6)

__global__ void rope_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t heads,
                            int64_t seq, int64_t d) {
  const int64_t half = d / 2;
  const int64_t p = blockIdx.x * static_cast<int64_t>(threads) + threadIdx.x;
  if (p >= seq * half) return;
  const int64_t pos = p / half, i = p % half;
  const double angle = static_cast<double>(pos) *
                       exp(-log_theta * (2.0 * static_cast<double>(i) / static_cast<double>(d)));
  double sn, cs;
  sincos(angle, &sn, &cs);
  const float c = static_cast<float>(cs), s = static_cast<float>(sn);
  const int64_t h0 = static_cast<int64_t>(blockIdx.y) * heads_per_thread;
  const int64_t h1 = h0 + heads_per_thread < heads ? h0 + heads_per_thread : heads;
  for (int64_t h = h0; h < h1; ++h) {
    const int64_t base = (h * seq + pos) * d;
    const float x1 = x[base + i], x2 = x[base + i + half];
    y[base + i] = x1 * c - x2 * s;
    y[base + i + half] = x2 * c + x1 * s;
  }
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 1 || n_out != 1 || in[0].dtype != KG_FLOAT32 || out[0].dtype != KG_FLOAT32 ||
      in[0].ndim < 2 || out[0].ndim != in[0].ndim)
    return 1;
  const int nd = in[0].ndim;
  int64_t heads = 1;
  for (int k = 0; k < nd; ++k) {
    if (out[0].shape[k] != in[0].shape[k]) return 1;
    if (k < nd - 2) heads *= in[0].shape[k];
  }
  const int64_t seq = in[0].shape[nd - 2], d = in[0].shape[nd - 1];
  if (d % 2 != 0) return 1;
  const int64_t pairs = seq * (d / 2);
  const int64_t head_groups = (heads + heads_per_thread - 1) / heads_per_thread;
  if (pairs == 0 || heads == 0) return 0;
  if (head_groups > 65535) return 3; // grid y limit
  const dim3 grid(static_cast<unsigned>((pairs + threads - 1) / threads),
                  static_cast<unsigned>(head_groups));
  rope_kernel<<<grid, threads, 0, s>>>(static_cast<const float*>(in[0].data),
                                       static_cast<float*>(out[0].data), heads, seq, d);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
