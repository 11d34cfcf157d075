// Qwen3-4B in BF16, the model the decode and LoRA workloads are shaped on (docs/architecture.md,
// The Qwen3-4B stack), and the byte and FLOP bookkeeping of its decode kernels: what a roofline
// ("fraction of the measured ceiling") and a decode step's bytes/bandwidth bound are computed
// from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kg {

struct qwen3_config {
  std::int64_t hidden = 2560;
  std::int64_t intermediate = 9728;
  std::int64_t layers = 36;
  std::int64_t q_heads = 32;
  std::int64_t kv_heads = 8;
  std::int64_t head_dim = 128;
  std::int64_t vocab = 151936;
  double rms_eps = 1e-6;
  double rope_theta = 1e6;
  std::int64_t bytes_per_element = 2; // bf16 weights, activations and KV cache
};

// A GEMM of the decode step: y[b, N] = x[b, K] @ W[N, K]^T.
struct decode_gemm {
  std::string name;
  std::int64_t n = 0, k = 0;
};
std::vector<decode_gemm>
decode_gemms(const qwen3_config& c = {}); // qkv, o_proj, gate_up, down, lm_head

struct roofline {
  double bytes = 0; // minimum bytes moved: each weight, input and output once
  double flops = 0;
};
roofline gemm_roofline(const decode_gemm& g, std::int64_t batch, const qwen3_config& c = {});
// Decode attention for `batch` sequences of `context` tokens: K and V of every layer's cache read
// once, q in and o out.
roofline attention_roofline(std::int64_t batch, std::int64_t context, const qwen3_config& c = {});
// KV cache bytes per token over all layers (K and V).
std::int64_t kv_bytes_per_token(const qwen3_config& c = {});
// One decode step: every layer's weights once (lm_head once; embeddings tied, gathered rows only),
// plus each sequence's KV cache and activations. The bytes/bandwidth bound of the step.
roofline decode_step_roofline(std::int64_t batch, std::int64_t context, const qwen3_config& c = {});

} // namespace kg
