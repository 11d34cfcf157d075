// The Qwen3 decode step's kernels apart from the GEMV (gemv_bf16.h), as one library
// (kg_decode_kernels) with plain pointer arguments so the decode engine can chain them in one CUDA
// graph. Every activation is a dense row-major bf16 [batch, ...] buffer; math is float32.
//
// Determinism: no kernel here uses atomics or a reduction whose order depends on the grid
// placement, and no launch shape depends on the SM count, so the same inputs give the same bits
// on a whole GPU and on a green-context partition (the solo vs co-located logits gate).
//
// Per-sequence state lives in device arrays indexed by batch row (positions, lengths, cache
// slots), so a graph captured once for a batch size serves every sequence length up to the
// cache's max_context.
//
// KV cache layout (per layer, K and V alike): one contiguous block per sequence,
//   block[kv_head][capacity][head_dim] (bf16),
// reserved for the sequence's whole lifetime (context + output tokens), as the
// continuous-batching loop admits sequences (no paging, no preemption). Two ways to name row b's
// block (kv_block.cuh): with a capacities array, slots[b] is the block's first token in a pool
// (element (slots[b] * kv_heads + h * capacities[b] + pos) * head_dim) -- blocks of any size, so
// short sequences take little; without, slots[b] is a slot of max_context tokens,
//   cache[slot][kv_head][max_context][head_dim],
// which is the block at first token slot * max_context of capacity max_context.
//
// Every launch returns cudaErrorInvalidValue for a shape it does not support, else the launch's
// error (cudaGetLastError). `programmatic` (the decode step's kernels): launched as a programmatic
// dependent of the kernel ahead in the stream (programmatic_launch.cuh); each kernel lets its
// successor be scheduled at its start and waits for its predecessor before touching memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "kernels/decode/attention_config.h"

namespace kg::decode {

// hidden = bf16(hidden + delta) (skipped when delta is null), then
// out = bf16(weight * bf16(hidden * rsqrt(mean(hidden^2) + eps))): Qwen3/HF rounding (normalize
// in float32, cast to bf16, multiply by the bf16 weight). hidden is updated in place. cols a
// multiple of 8, at most 8192, every pointer 16-byte aligned.
cudaError_t launch_add_rmsnorm(const __nv_bfloat16* delta, __nv_bfloat16* hidden,
                               const __nv_bfloat16* weight, __nv_bfloat16* out, int rows, int cols,
                               float eps, cudaStream_t s, bool programmatic = false);

// Per-head RMSNorm in place: for each row b and head h < heads, the head_dim elements at
// x + b * row_stride + h * head_dim are normalized as launch_add_rmsnorm does, with the shared
// weight[head_dim]. head_dim a multiple of 32, at most 256.
cudaError_t launch_head_rmsnorm(__nv_bfloat16* x, int rows, std::int64_t row_stride, int heads,
                                int head_dim, const __nv_bfloat16* weight, float eps,
                                cudaStream_t s);

// Rotary embedding in place (rotate-half: pairs (i, i + head_dim / 2)) of `heads` consecutive
// heads at x + b * row_stride, at position positions[b]; angle = pos * theta^(-2i / head_dim) in
// double, rotation in float32, one bf16 rounding.
cudaError_t launch_rope(__nv_bfloat16* x, int rows, std::int64_t row_stride, int heads,
                        int head_dim, const int* positions, double theta, cudaStream_t s);

// Writes row b's k and v (kv_heads x head_dim each, at k + b * row_stride, v + b * row_stride)
// into the cache at slot slots[b], position positions[b]. head_dim a multiple of 8.
cudaError_t launch_kv_append(const __nv_bfloat16* k, const __nv_bfloat16* v,
                             std::int64_t row_stride, __nv_bfloat16* k_cache,
                             __nv_bfloat16* v_cache, const int* slots, const int* positions,
                             int rows, int kv_heads, int head_dim, int max_context, cudaStream_t s);

// The three above in one launch, on a qkv row laid out [q heads | k heads | v heads] (head_dim
// each, row b at qkv + b * row_stride): q and k heads normalized (q_weight, k_weight) and rotated
// in place, then row b's k and v appended as launch_kv_append does. Bit-identical to
// launch_head_rmsnorm (q), launch_head_rmsnorm (k), launch_rope (q and k), launch_kv_append in
// that order. head_dim 64 or 128.
cudaError_t launch_qk_norm_rope_append(__nv_bfloat16* qkv, int rows, std::int64_t row_stride,
                                       int q_heads, int kv_heads, int head_dim,
                                       const __nv_bfloat16* q_weight, const __nv_bfloat16* k_weight,
                                       float eps, const int* positions, double theta,
                                       const int* slots, __nv_bfloat16* k_cache,
                                       __nv_bfloat16* v_cache, int max_context, cudaStream_t s,
                                       bool programmatic = false, const int* capacities = nullptr);

// Split-KV decode attention, GQA: out[b, h] = softmax(q[b, h] . K[slot, h / group, :len] / sqrt(D))
// V[slot, h / group, :len], len = lengths[b] (1..max_context). q: q_heads x head_dim per row at
// q + b * q_row_stride; out: dense [rows, q_heads * head_dim].
// Stage 1 cuts each sequence into chunks whose size depends only on its length
// (attention_config.h: attention_chunk_tokens) and writes one partial softmax state per (row, kv
// head, chunk); chunks beyond a row's length write nothing and are never read. Stage 2 merges a
// row's chunks in chunk order (or, with merge_in_stage1 and counters, stage 1's last block of the
// row and kv head does, with the same bits). The grid depends on rows and max_context only.
// Supported: head_dim 64 or 128, group (q_heads / kv_heads) 1, 2, 4 or 8.
// launch_attention uses pick_attention_config(rows); the workspace must hold
// attention_workspace_bytes for the configuration used (the bound over every length up to
// max_context). The overload without a configuration gives the most any batch of 1..rows rows
// needs under pick_attention_config, so one workspace serves every batch size up to rows.
std::size_t attention_workspace_bytes(int rows, int q_heads, int kv_heads, int head_dim,
                                      int max_context);

// The operands of an attention launch. q: the q heads of each row at q + b * q_row_stride (the
// fused launch: each row's [q heads | k heads | v heads], q_row_stride >= (q_heads + 2 kv_heads)
// head_dim); the caches [slots][kv_heads][max_context][head_dim] (read; the fused launch also
// appends each row's new token); out: dense [rows, q_heads * head_dim].
struct attention_args {
  const __nv_bfloat16* q = nullptr;
  std::int64_t q_row_stride = 0; // elements, a multiple of 8
  __nv_bfloat16* k_cache = nullptr;
  __nv_bfloat16* v_cache = nullptr;
  const int* slots = nullptr;   // [rows]: each row's cache slot
  const int* lengths = nullptr; // [rows]: 1..max_context tokens, the new one included
  __nv_bfloat16* out = nullptr;
  void* workspace = nullptr; // attention_workspace_bytes
  int rows = 0, q_heads = 0, kv_heads = 0, head_dim = 0, max_context = 0;
  // [rows] or null: each row's block capacity, slots[b] then its first token (the layout above)
  const int* capacities = nullptr;
  // [rows * kv_heads] or null: a configuration with merge_in_stage1 merges in stage 1's last
  // block of each (row, kv head), counted here (attention_merges_in_stage1 says when it can).
  // Zero before the first launch that uses them; every launch leaves them zero. Null: stage 2
  // merges, with the same bits. Launches that may run at the same time need their own.
  unsigned* counters = nullptr;
};

cudaError_t launch_attention(const attention_args& a, cudaStream_t s, bool programmatic = false);
// The same with an explicit configuration (bench/attention_sweep, the tests); an unsupported one
// (attention_config_supported) returns cudaErrorInvalidValue.
std::size_t attention_workspace_bytes(const attention_config& c, int rows, int q_heads,
                                      int kv_heads, int head_dim, int max_context);
cudaError_t launch_attention_with(const attention_config& c, const attention_args& a,
                                  cudaStream_t s, bool programmatic = false);

// The decode step's prologue and attention in one launch pair: launch_qk_norm_rope_append
// (positions = lengths - 1) then launch_attention, bit for bit (outputs and cache), except that
// qkv is only read (its q and k heads stay as the GEMV wrote them). Each stage-1 block normalizes
// and rotates the q heads it attends with, and the block whose chunk holds position
// lengths[b] - 1 also makes that token's k and v, uses them from registers and appends them to
// the cache; the norm weights and the rotation are loaded before the programmatic wait. One
// kernel boundary fewer per layer (docs/performance.md has what the prologue kernel cost).
// a.q: the qkv rows, 16-byte aligned.
struct attention_prologue {
  const __nv_bfloat16* q_weight = nullptr; // [head_dim]: the q heads' RMSNorm weight
  const __nv_bfloat16* k_weight = nullptr; // [head_dim]: the k heads'
  float eps = 1e-6f;
  double theta = 1e6; // RoPE base (> 1)
};
cudaError_t launch_attention_fused(const attention_args& a, const attention_prologue& p,
                                   cudaStream_t s, bool programmatic = false);
cudaError_t launch_attention_fused_with(const attention_config& c, const attention_args& a,
                                        const attention_prologue& p, cudaStream_t s,
                                        bool programmatic = false);

// out[b, i] = bf16(silu(g) * u), g = gate_up[b, i], u = gate_up[b, inter + i] (gate rows first,
// as the fused gate_up projection lays them out); silu in float32.
cudaError_t launch_silu_gate_mul(const __nv_bfloat16* gate_up, __nv_bfloat16* out, int rows,
                                 int inter, cudaStream_t s, bool programmatic = false);

// out[b, :] = table[tokens[b], :] (cols a multiple of 8).
cudaError_t launch_embedding_gather(const __nv_bfloat16* table, const int* tokens,
                                    __nv_bfloat16* out, int rows, int cols, cudaStream_t s,
                                    bool programmatic = false);

// out[b] = the first index of the maximum of x[b, :cols] (greedy decoding; NaNs never win).
cudaError_t launch_argmax(const __nv_bfloat16* x, int* out, int rows, int cols, cudaStream_t s,
                          bool programmatic = false);

// Deterministic pseudo-random bf16: x[i] = mean + sd * u_i with u_i uniform of unit variance
// (range +-sqrt(3)) from a counter hash of (seed, stream_id, i): the same values on any device
// and grid.
cudaError_t launch_fill_uniform(__nv_bfloat16* x, std::size_t n, std::uint64_t seed,
                                std::uint64_t stream_id, float mean, float sd, cudaStream_t s);

// Synthetic prefill: K and V of the block at first token kv_start (capacity kv_capacity),
// positions [0, context), every kv head, drawn like launch_fill_uniform from (seed, layer, kv
// head, position) -- not from the block, so one context gives one cache wherever it lands. K has
// sd k_sd, V v_sd.
cudaError_t launch_fill_kv_synthetic(__nv_bfloat16* k_cache, __nv_bfloat16* v_cache, int kv_start,
                                     int kv_capacity, int context, int kv_heads, int head_dim,
                                     std::uint64_t seed, int layer, float k_sd, float v_sd,
                                     cudaStream_t s);

} // namespace kg::decode
