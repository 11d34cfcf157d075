// The decode engine's host-side bookkeeping, apart from the GPU so it is unit-tested without one:
// the engine's configuration and its memory sizes, the KV-cache slot pool, and the tracker that
// turns the continuous-batching loop's step plans (continuous_batching.h) into engine rows.
#pragma once

#include <cstdint>
#include <vector>

#include "workloads/continuous_batching.h"
#include "workloads/qwen3.h"

namespace kg {

struct decode_engine_config {
  qwen3_config model;
  int max_batch = 32;     // graphs for batch 1..max_batch; one KV slot per batch row
  int max_context = 8448; // tokens a slot holds: the longest context (8192) + 256 outputs
  std::uint64_t seed = 20261129;
  // Weights ~ uniform of this sd (embeddings, projections); RMSNorm weights 1 +- 0.1. With 0.02
  // a projection of a unit-RMS input comes out at RMS ~0.02 sqrt(K) (1.0 for K = 2560), so the
  // activations stay O(1) and finite through 36 layers.
  float weight_sd = 0.02f;
  // Each kernel of the step after the first is a programmatic dependent of the one ahead
  // (kernels/decode/programmatic_launch.cuh): its launch overlaps the kernel ahead's tail. The
  // same kernels and bits either way; false gives plain launches (decode-qwen3-4b times both,
  // docs/cli.md; decode_engine::set_programmatic_launch switches).
  bool programmatic_launch = true;
};

// 2 layers, hidden 256, 4 q heads / 2 kv heads of 64, intermediate 512, vocab 1000; batch 8,
// context 1024: small enough for a host fp64 reference forward in a test.
decode_engine_config tiny_decode_engine_config();

// Throws std::invalid_argument naming what the kernels cannot take (head_dim 64 or 128, a GQA
// group of 1/2/4/8, dimensions multiples of 8, ...).
void validate_decode_engine_config(const decode_engine_config& c);

struct decode_engine_sizes {
  std::int64_t qkv_width = 0;             // (q_heads + 2 kv_heads) head_dim
  std::int64_t layer_weight_elements = 0; // norms and projections of one layer
  std::int64_t weight_elements = 0;       // all layers + embeddings (tied lm_head) + final norm
  std::int64_t kv_cache_bytes = 0;        // K and V, every layer, max_batch slots of max_context
};
decode_engine_sizes decode_engine_sizes_of(const decode_engine_config& c);

// Free KV-cache slots, lowest first (so a run's slot use is reproducible).
class kv_slot_pool {
public:
  explicit kv_slot_pool(int slots);
  int acquire();          // throws std::logic_error when none is free
  void release(int slot); // throws std::logic_error on a slot not held
  int free_slots() const;

private:
  std::vector<bool> held_;
};

// Mirrors run_continuous_batching's running set (every sequence has `output_tokens` outputs): a
// step's decode rows are the running sequences in admission order -- the loop's order -- and the
// admitted sequences join at the end after their prefill. begin() checks the plan's decode
// lengths against the mirror, so a drift between the two throws instead of decoding garbage.
class decode_row_tracker {
public:
  struct row {
    int slot = 0;
    std::int64_t context = 0;
    std::int64_t generated = 0; // tokens out so far (the prefill's is the first)
    int token = 0;              // the last token out: this step's input
    std::int64_t position() const { return context + generated - 1; } // of the input token
  };
  decode_row_tracker(int slots, std::int64_t output_tokens);

  // The rows to decode (batch rows 0..n-1) and the newly admitted ones, each with a slot.
  struct step_rows {
    std::vector<row> decode, admitted;
  };
  step_rows begin(const step_plan& plan);
  // decode_tokens: the step's output per decode row; first_tokens: each admitted sequence's first
  // token (its prefill's). Advances every row, retires finished ones and frees their slots.
  void end(const std::vector<int>& decode_tokens, const std::vector<int>& first_tokens);
  int running() const { return static_cast<int>(rows_.size()); }

private:
  kv_slot_pool pool_;
  std::int64_t output_tokens_;
  std::vector<row> rows_, pending_;
};

} // namespace kg
