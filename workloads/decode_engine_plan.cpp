#include "workloads/decode_engine_plan.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace kg {

decode_engine_config tiny_decode_engine_config() {
  decode_engine_config c;
  c.model.hidden = 256;
  c.model.intermediate = 512;
  c.model.layers = 2;
  c.model.q_heads = 4;
  c.model.kv_heads = 2;
  c.model.head_dim = 64;
  c.model.vocab = 1000;
  c.max_batch = 8;
  c.max_context = 1024;
  return c;
}

void validate_decode_engine_config(const decode_engine_config& c) {
  const auto& m = c.model;
  auto fail = [](const std::string& why) {
    throw std::invalid_argument("decode engine configuration: " + why);
  };
  if (m.head_dim != 64 && m.head_dim != 128) fail("head_dim must be 64 or 128");
  if (m.kv_heads < 1 || m.q_heads % m.kv_heads) fail("q_heads must be a multiple of kv_heads");
  const auto group = m.q_heads / m.kv_heads;
  if (group != 1 && group != 2 && group != 4 && group != 8) fail("GQA group must be 1, 2, 4 or 8");
  if (m.hidden % 8 || m.intermediate % 8 || m.hidden < 8)
    fail("hidden and intermediate: multiples of 8");
  if (m.layers < 1 || m.vocab < 1) fail("layers and vocab must be positive");
  if (m.vocab > (std::int64_t{1} << 31) - 1 || m.intermediate * 2 > (std::int64_t{1} << 31) - 1)
    fail("vocab and 2 x intermediate must fit an int");
  if (c.max_batch < 1 || c.max_batch > 256) fail("max_batch must be 1..256");
  if (c.max_context < 1) fail("max_context must be positive");
  if (c.kv_pool_tokens < 0 || (c.kv_pool_tokens > 0 && c.kv_pool_tokens < c.max_context))
    fail("kv_pool_tokens must be 0 or at least max_context");
  if (kv_pool_tokens_of(c) * m.kv_heads > (std::int64_t{1} << 31) - 1)
    fail("the KV pool's tokens x kv_heads must fit an int");
  if (c.max_prefill_tokens < 0 || c.max_prefill_tokens > 8192)
    fail("max_prefill_tokens must be 0..8192");
  if (c.max_gemv_batch < 1 || c.max_gemv_batch > 256) fail("max_gemv_batch must be 1..256");
  if (!(c.weight_sd > 0)) fail("weight_sd must be positive");
}

decode_engine_sizes decode_engine_sizes_of(const decode_engine_config& c) {
  const auto& m = c.model;
  decode_engine_sizes s;
  s.qkv_width = (m.q_heads + 2 * m.kv_heads) * m.head_dim;
  s.layer_weight_elements = 2 * m.hidden                        // input and post-attention norms
                            + 2 * m.head_dim                    // q and k norms
                            + s.qkv_width * m.hidden            // qkv
                            + m.hidden * m.q_heads * m.head_dim // o_proj
                            + 2 * m.intermediate * m.hidden     // gate_up
                            + m.hidden * m.intermediate;        // down
  s.weight_elements = m.layers * s.layer_weight_elements + m.vocab * m.hidden + m.hidden;
  s.kv_cache_bytes = kv_pool_tokens_of(c) * kv_bytes_per_token(m);
  // Per row: hidden, normed, qkv, attention out, o_proj out, gate_up, SiLU out, MLP out, logits
  // (the engine's carving, rounded as it rounds).
  const std::int64_t per_row = 5 * m.hidden + s.qkv_width + m.q_heads * m.head_dim +
                               3 * m.intermediate + (m.vocab + 7) / 8 * 8;
  s.activation_bytes = per_row * (c.max_batch + c.max_prefill_tokens) * m.bytes_per_element;
  return s;
}

std::int64_t kv_pool_tokens_of(const decode_engine_config& c) {
  return c.kv_pool_tokens > 0 ? c.kv_pool_tokens
                              : static_cast<std::int64_t>(c.max_batch) * c.max_context;
}

decode_engine_config serving_engine_config(std::int64_t free_bytes, std::int64_t reserve_bytes,
                                           int max_batch, int max_prefill_tokens) {
  decode_engine_config c;
  c.max_batch = max_batch;
  c.max_prefill_tokens = max_prefill_tokens;
  c.kv_pool_tokens = 1; // sizes below without the pool
  const auto s = decode_engine_sizes_of(c);
  // The weights may get a packed copy of the same size (decode_engine.h): count them twice.
  const std::int64_t fixed =
      2 * s.weight_elements * c.model.bytes_per_element + s.activation_bytes + reserve_bytes;
  const std::int64_t per_token = kv_bytes_per_token(c.model);
  const std::int64_t fits = (free_bytes - fixed) / per_token;
  if (fits < c.max_context)
    throw std::invalid_argument("serving engine: " + std::to_string(free_bytes >> 20) +
                                " MiB free hold no sequence of " + std::to_string(c.max_context) +
                                " tokens beside the weights");
  c.kv_pool_tokens =
      std::min<std::int64_t>(fits, static_cast<std::int64_t>(max_batch) * c.max_context);
  return c;
}

kv_slot_pool::kv_slot_pool(int slots) {
  if (slots < 1) throw std::invalid_argument("kv_slot_pool needs at least one slot");
  held_.assign(static_cast<std::size_t>(slots), false);
}

int kv_slot_pool::acquire() {
  const auto it = std::find(held_.begin(), held_.end(), false);
  if (it == held_.end()) throw std::logic_error("kv_slot_pool: every slot is held");
  *it = true;
  return static_cast<int>(it - held_.begin());
}

void kv_slot_pool::release(int slot) {
  if (slot < 0 || slot >= static_cast<int>(held_.size()) || !held_[static_cast<std::size_t>(slot)])
    throw std::logic_error("kv_slot_pool: releasing slot " + std::to_string(slot) +
                           ", which is not held");
  held_[static_cast<std::size_t>(slot)] = false;
}

int kv_slot_pool::free_slots() const {
  return static_cast<int>(std::count(held_.begin(), held_.end(), false));
}

} // namespace kg
