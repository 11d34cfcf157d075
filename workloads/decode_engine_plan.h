// The decode engine's host-side bookkeeping, apart from the GPU so it is unit-tested without one:
// the engine's configuration and its memory sizes and the pool of slot ids (the serving driver's
// KV blocks are kv_allocator.h's).
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
  // The RMSNorms folded into the GEMVs where their configurations allow (gemv_fusion: the
  // residual add into o_proj's and down's stores, each norm into the GEMV it feeds; the simt
  // family, batch 1 on the H200 table): a kernel fewer on the step's path per norm, the same bits
  // (decode_engine::layer_roles says which kernels run). Off until the step is timed both ways on
  // the H200 (kg_bench_decode_step --norms fold,kernels; docs/architecture.md, Serving): an
  // earlier fold of the input norm, each block normalising the row in shared memory, was slower.
  bool fold_norms = false;
  // The SwiGLU gate as the gate_up GEMV's epilogue where its configuration takes it
  // (gemv_gated_supported: the simt rows at two rows a warp, wgmma_pk at split 1 over a paired
  // copy of gate_up), else its own kernel after the GEMV; the same bits either way
  // (kg_bench_decode_step --gate epilogue,kernel times the step both ways;
  // decode_engine::set_gate_in_gemv switches).
  bool gate_in_gemv = true;
  // The KV cache as a pool of this many tokens (kernels/decode/decode_kernels.h, KV cache
  // layout): the serving driver places each sequence's block where its kv_block_allocator says
  // (decode_engine::bind_slot), so short sequences take little and the batch can grow to what the
  // tokens allow. 0: max_batch slots of max_context tokens. Either way slot s starts bound to the
  // block at token s * max_context of capacity max_context while that fits the pool.
  std::int64_t kv_pool_tokens = 0;
  // Rows a real prefill launch takes at most (decode_engine::prefill_chunk: the step's prompt
  // tokens over its sequences); 0: no prefill buffers, prefill_chunk refused.
  int max_prefill_tokens = 0;
  // Decode batches above this run their projections as cuBLAS GEMMs; the GEMV table covers batch
  // 1-128 (kg_bench_decode_step raises it to time those), the step-level figures use <= 32. Up to
  // 256: batches above gemv_launch_rows run as GEMV launches of that many rows (our kernels at
  // every batch, whose bits do not depend on the SMs they are granted).
  int max_gemv_batch = 32;
};

// The most rows one decode GEMV launch of the engine takes: the GEMV table's last batch.
inline constexpr int gemv_launch_rows = 128;

// The serving engine on the H200 (docs/architecture.md, Serving): up to `max_batch` sequences,
// a KV pool of what `free_bytes` of device memory holds after the engine's weights, activations,
// prefill buffers and `reserve_bytes`, at most max_batch x max_context tokens, and prefill chunks
// of up to max_prefill_tokens. Throws std::invalid_argument when less than one max_context
// sequence fits.
decode_engine_config serving_engine_config(std::int64_t free_bytes, std::int64_t reserve_bytes,
                                           int max_batch = 256, int max_prefill_tokens = 512);

// Tokens of the KV pool (kv_pool_tokens, or max_batch x max_context).
std::int64_t kv_pool_tokens_of(const decode_engine_config& c);

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
  std::int64_t kv_cache_bytes = 0;        // K and V, every layer, the pool's tokens
  std::int64_t activation_bytes = 0;      // decode rows (max_batch) and prefill rows
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

} // namespace kg
