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
  s.kv_cache_bytes = m.layers * 2 * static_cast<std::int64_t>(c.max_batch) * m.kv_heads *
                     c.max_context * m.head_dim * m.bytes_per_element;
  return s;
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

decode_row_tracker::decode_row_tracker(int slots, std::int64_t output_tokens)
    : pool_(slots), output_tokens_(output_tokens) {
  if (output_tokens < 1) throw std::invalid_argument("output_tokens must be at least 1");
}

decode_row_tracker::step_rows decode_row_tracker::begin(const step_plan& plan) {
  if (!pending_.empty()) throw std::logic_error("decode_row_tracker: begin() twice without end()");
  if (plan.decode_lengths.size() != rows_.size())
    throw std::logic_error("decode_row_tracker: the plan decodes " +
                           std::to_string(plan.decode_lengths.size()) + " sequences, " +
                           std::to_string(rows_.size()) + " are running");
  for (std::size_t i = 0; i < rows_.size(); ++i)
    if (plan.decode_lengths[i] != rows_[i].context + rows_[i].generated)
      throw std::logic_error("decode_row_tracker: row " + std::to_string(i) + " has length " +
                             std::to_string(rows_[i].context + rows_[i].generated) +
                             ", the plan says " + std::to_string(plan.decode_lengths[i]));
  for (const auto c : plan.prefill_contexts) {
    row r;
    r.slot = pool_.acquire();
    r.context = c;
    pending_.push_back(r);
  }
  return {rows_, pending_};
}

void decode_row_tracker::end(const std::vector<int>& decode_tokens,
                             const std::vector<int>& first_tokens) {
  if (decode_tokens.size() != rows_.size() || first_tokens.size() != pending_.size())
    throw std::logic_error("decode_row_tracker: end() needs one token per decode row and one per "
                           "admitted sequence");
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    rows_[i].token = decode_tokens[i];
    ++rows_[i].generated;
  }
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    pending_[i].token = first_tokens[i];
    pending_[i].generated = 1;
    rows_.push_back(pending_[i]);
  }
  pending_.clear();
  // As the loop does: finished sequences leave, the others keep their order.
  std::erase_if(rows_, [&](const row& r) {
    if (r.generated < output_tokens_) return false;
    pool_.release(r.slot);
    return true;
  });
}

} // namespace kg
