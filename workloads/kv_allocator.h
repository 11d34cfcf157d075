// The decode engine's KV-cache pool as the continuous-batching loop sees it
// (continuous_batching.h, batching_options::kv_reserve): a sequence is admitted only when one
// contiguous block holds its whole lifetime, so a fragmented pool can refuse what a token counter
// would admit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace kg {

// Contiguous blocks of a KV-cache pool of `capacity` tokens, first fit at the lowest start, sizes
// rounded up to `granule` tokens; freed neighbours merge. The decode engine gives each running
// sequence one block for its whole lifetime (decode_kernels.h, KV cache layout).
//
// Blocks start on granule boundaries; a tail of capacity % granule tokens counts as free (in
// free_tokens and largest_free) but no rounded block fits in it alone.
class kv_block_allocator {
public:
  // invalid_argument unless capacity >= granule >= 1
  explicit kv_block_allocator(std::int64_t capacity, std::int64_t granule = 64);
  // The block's first token; nullopt when no free run is long enough; invalid_argument for
  // tokens < 1.
  std::optional<std::int64_t> allocate(std::int64_t tokens);
  void release(std::int64_t start);                    // logic_error unless an allocated block's
  std::int64_t block_tokens(std::int64_t start) const; // its rounded size; logic_error if none
  std::int64_t free_tokens() const { return free_tokens_; }
  std::int64_t largest_free() const { return longest_[1]; }
  std::int64_t capacity() const { return capacity_; }

private:
  void add_free(std::int64_t start, std::int64_t tokens);
  void remove_free(std::map<std::int64_t, std::int64_t>::iterator run);
  void set_longest(std::int64_t start, std::int64_t tokens);
  std::optional<std::int64_t> lowest_fit(std::int64_t tokens) const;

  std::int64_t capacity_, granule_, free_tokens_;
  std::map<std::int64_t, std::int64_t> used_, free_; // start -> tokens
  // First fit needs the lowest start whose run is long enough, which a map alone finds only by a
  // scan: a max tree over the granules (leaf g: the free run starting at token g * granule, else
  // 0) finds it in O(log(capacity / granule)).
  std::size_t leaves_ = 1;
  std::vector<std::int64_t> longest_;
};

} // namespace kg
