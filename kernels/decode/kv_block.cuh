// Where a row's KV-cache block lives (decode_kernels.h, KV cache layout), written once for every
// kernel that reads or writes the cache.
#pragma once

#include <cstddef>

namespace kg::decode {

// The offset, in head_dim-element rows, of kv head `kvh` at position 0 of row b's block. With
// capacities, slot is the block's first token (blocks of any size in one pool); without, it is
// a slot index of max_context tokens -- the same memory as a block starting at
// slot * max_context with capacity max_context.
__device__ __forceinline__ std::size_t kv_head_offset(int slot, const int* capacities, int b,
                                                      int kv_heads, int kvh, int max_context) {
  if (capacities)
    return static_cast<std::size_t>(slot) * kv_heads +
           static_cast<std::size_t>(kvh) * static_cast<std::size_t>(capacities[b]);
  return (static_cast<std::size_t>(slot) * kv_heads + kvh) * static_cast<std::size_t>(max_context);
}

} // namespace kg::decode
