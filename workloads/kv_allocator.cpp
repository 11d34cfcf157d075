#include "workloads/kv_allocator.h"

#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <string>

namespace kg {

kv_block_allocator::kv_block_allocator(std::int64_t capacity, std::int64_t granule)
    : capacity_(capacity), granule_(granule), free_tokens_(capacity) {
  if (granule < 1 || capacity < granule)
    throw std::invalid_argument(
        "kv_block_allocator: needs capacity >= granule >= 1, got capacity " +
        std::to_string(capacity) + ", granule " + std::to_string(granule));
  // Every free run starts on a granule boundary below capacity: ceil(capacity / granule) leaves.
  const auto granules = static_cast<std::size_t>((capacity + granule - 1) / granule);
  while (leaves_ < granules)
    leaves_ *= 2;
  longest_.assign(2 * leaves_, 0);
  add_free(0, capacity);
}

std::optional<std::int64_t> kv_block_allocator::allocate(std::int64_t tokens) {
  if (tokens < 1)
    throw std::invalid_argument("kv_block_allocator: cannot allocate " + std::to_string(tokens) +
                                " tokens");
  if (tokens > capacity_) return std::nullopt; // also keeps the rounding below from overflowing
  const std::int64_t rounded = (tokens + granule_ - 1) / granule_ * granule_;
  const auto start = lowest_fit(rounded);
  if (!start) return std::nullopt;
  const auto run = free_.find(*start);
  const std::int64_t run_tokens = run->second;
  remove_free(run);
  if (run_tokens > rounded) add_free(*start + rounded, run_tokens - rounded);
  used_.emplace(*start, rounded);
  free_tokens_ -= rounded;
  return start;
}

void kv_block_allocator::release(std::int64_t start) {
  const auto block = used_.find(start);
  if (block == used_.end())
    throw std::logic_error("kv_block_allocator: no block starts at token " + std::to_string(start));
  std::int64_t begin = start, end = start + block->second;
  free_tokens_ += block->second;
  used_.erase(block);
  // Merge with the free runs touching either side, so a long request finds one run again.
  const auto right = free_.find(end);
  if (right != free_.end()) {
    end += right->second;
    remove_free(right);
  }
  const auto after = free_.lower_bound(begin);
  if (after != free_.begin()) {
    const auto left = std::prev(after);
    if (left->first + left->second == begin) {
      begin = left->first;
      remove_free(left);
    }
  }
  add_free(begin, end - begin);
}

std::int64_t kv_block_allocator::block_tokens(std::int64_t start) const {
  const auto block = used_.find(start);
  if (block == used_.end())
    throw std::logic_error("kv_block_allocator: no block starts at token " + std::to_string(start));
  return block->second;
}

void kv_block_allocator::add_free(std::int64_t start, std::int64_t tokens) {
  free_.emplace(start, tokens);
  set_longest(start, tokens);
}

void kv_block_allocator::remove_free(std::map<std::int64_t, std::int64_t>::iterator run) {
  set_longest(run->first, 0);
  free_.erase(run);
}

void kv_block_allocator::set_longest(std::int64_t start, std::int64_t tokens) {
  std::size_t node = leaves_ + static_cast<std::size_t>(start / granule_);
  longest_[node] = tokens;
  for (node /= 2; node >= 1; node /= 2)
    longest_[node] = std::max(longest_[2 * node], longest_[2 * node + 1]);
}

// Down the max tree, always into the left child when its subtree holds a long enough run.
std::optional<std::int64_t> kv_block_allocator::lowest_fit(std::int64_t tokens) const {
  if (longest_[1] < tokens) return std::nullopt;
  std::size_t node = 1;
  while (node < leaves_)
    node = longest_[2 * node] >= tokens ? 2 * node : 2 * node + 1;
  return static_cast<std::int64_t>(node - leaves_) * granule_;
}

} // namespace kg
