// LoRA rank-r training on a Qwen3-style decoder (issue: workloads under test): the frozen base
// model's weights, one adapter pair (A, B) on the q and on the v projection of every layer per
// job, a token batch, and the loss. Shared by the fp64 reference (lora_reference.h) and the
// LibTorch autograd driver (lora_torch.h), so both compute from the same bytes. Random weights,
// no checkpoint: every tensor is drawn from kg::rng streams named after it.
//
// The model, per layer (Qwen3): h = rmsnorm(x) * w_in; q = h Wq^T + s (h Aq^T) Bq^T;
// k = h Wk^T; v = h Wv^T + s (h Av^T) Bv^T; q, k RMS-normalized per head (weights q_norm,
// k_norm); RoPE (rotate-half, theta) on q and k; causal attention with grouped kv heads, scale
// 1/sqrt(head_dim); x += attn Wo^T; h = rmsnorm(x) * w_post; x += (silu(h Wg^T) * (h Wu^T)) Wd^T.
// Then rmsnorm(x) * w_final, logits = x Wlm^T, loss = mean cross-entropy over the positions.
// s = alpha / rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "workloads/qwen3.h"

namespace kg {

struct lora_config {
  qwen3_config model; // sizes; layers, vocab etc. (tests shrink them)
  std::int64_t rank = 8;
  double alpha = 16.0;
  std::int64_t seq = 2048;
  double init_scale = 1.0; // multiplies the base weights' N(0, 1/sqrt(fan_in)) draws
  double scaling() const { return alpha / static_cast<double>(rank); }
};

// Row-major matrices as flat vectors ([out][in] for projections, as torch.nn.Linear).
struct lora_layer_base {
  std::vector<double> w_in, wq, wk, wv, wo, q_norm, k_norm, w_post, wg, wu, wd;
};
struct lora_base {
  std::vector<double> embed; // [vocab][hidden]
  std::vector<lora_layer_base> layers;
  std::vector<double> w_final, lm_head; // [hidden], [vocab][hidden]
};
// One job's adapters, per layer: aq [rank][hidden], bq [q_heads*head_dim][rank], av, bv likewise.
struct lora_adapters {
  struct layer {
    std::vector<double> aq, bq, av, bv;
  };
  std::vector<layer> layers;
  std::size_t size() const;         // number of adapter parameters
  std::vector<double> flat() const; // aq, bq, av, bv of layer 0, then layer 1, ...
  void set_flat(const std::vector<double>& v);
};
struct lora_batch {
  std::vector<std::int64_t> tokens, targets; // [seq] each
};

// A 2-layer Qwen3-shaped model (hidden 32, 4 q / 2 kv heads of 8, intermediate 48, vocab 40,
// 12 tokens, rank 4, alpha 8): small enough for the fp64 finite-difference reference.
lora_config lora_small_config();

lora_base make_lora_base(const lora_config& c, std::uint64_t seed);
// B is drawn nonzero (not LoRA's usual zero init) so that every adapter has a gradient at step 0.
lora_adapters make_lora_adapters(const lora_config& c, std::uint64_t seed, int job);
lora_batch make_lora_batch(const lora_config& c, std::uint64_t seed, int job);

} // namespace kg
