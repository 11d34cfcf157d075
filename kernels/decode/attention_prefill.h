// Causal prefill attention for chunked prefill (attention_prefill.cu has the design): one
// sequence's chunk of prompt rows against that sequence's KV cache block, bf16 in and out,
// float32 accumulation on the tensor cores.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace kg::decode {

// Causal attention over a chunk of one sequence's prompt (chunked prefill): rows r = 0..n-1 are
// the sequence's tokens at positions p0 + r, whose K and V are already in the cache (appended by
// launch_qk_norm_rope_append); q head h of row r attends to positions [0, p0 + r] of kv head
// h / (q_heads / kv_heads), softmax scaled by 1/sqrt(head_dim), float32 accumulation.
// The sequence's cache block: element d of kv head g at position pos is at
//   k_cache[((size_t)kv_start * kv_heads + (size_t)g * kv_capacity + pos) * head_dim + d]
// (the same for v_cache), pos < kv_capacity, p0 + n <= kv_capacity.
struct prefill_attention_args {
  const __nv_bfloat16* q = nullptr; // row r's q heads (q_heads x head_dim) at q + r * q_row_stride
  std::int64_t q_row_stride = 0;    // elements, a multiple of 8
  const __nv_bfloat16* k_cache = nullptr;
  const __nv_bfloat16* v_cache = nullptr;
  int kv_start = 0, kv_capacity = 0;
  int p0 = 0, n = 0;
  __nv_bfloat16* out = nullptr; // dense [n, q_heads * head_dim]
  int q_heads = 0, kv_heads = 0, head_dim = 0;
};

// cudaErrorInvalidValue for an unsupported shape (head_dim 64 or 128; q_heads a multiple of
// kv_heads; n >= 1; p0 >= 0; p0 + n <= kv_capacity; pointers 16-byte aligned), else the launch's
// error. Only cache positions [0, p0 + n) of the block are read; nothing past them (garbage, NaN)
// can reach the output.
cudaError_t launch_prefill_attention(const prefill_attention_args& a, cudaStream_t s);

} // namespace kg::decode
