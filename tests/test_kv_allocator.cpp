// The KV block allocator (workloads/kv_allocator.h) on hand-worked sequences of allocations and
// releases, and against a token-by-token model of the pool on a seeded random workload.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/rng.h"
#include "workloads/kv_allocator.h"

using namespace kg;

// Sizes round up to the granule; blocks are laid out from token 0, first fit.
TEST(kv_block_allocator, rounds_sizes_up_to_the_granule_and_fills_from_the_start) {
  kv_block_allocator a(1024, 64);
  EXPECT_EQ(a.capacity(), 1024);
  EXPECT_EQ(a.free_tokens(), 1024);
  EXPECT_EQ(a.largest_free(), 1024);
  EXPECT_EQ(a.allocate(1), std::optional<std::int64_t>(0));
  EXPECT_EQ(a.block_tokens(0), 64);
  EXPECT_EQ(a.allocate(64), std::optional<std::int64_t>(64));
  EXPECT_EQ(a.block_tokens(64), 64);
  EXPECT_EQ(a.allocate(65), std::optional<std::int64_t>(128));
  EXPECT_EQ(a.block_tokens(128), 128);
  EXPECT_EQ(a.free_tokens(), 1024 - 256);
  EXPECT_EQ(a.largest_free(), 1024 - 256);
}

// A hole at 64..128 takes a request that fits it (lowest start), not one that does not.
TEST(kv_block_allocator, first_fit_takes_the_lowest_hole_long_enough) {
  kv_block_allocator a(1024, 64);
  ASSERT_EQ(a.allocate(64), std::optional<std::int64_t>(0));
  ASSERT_EQ(a.allocate(64), std::optional<std::int64_t>(64));
  ASSERT_EQ(a.allocate(128), std::optional<std::int64_t>(128));
  a.release(64); // free: [64, 128) and [256, 1024)
  EXPECT_EQ(a.largest_free(), 768);
  EXPECT_EQ(a.allocate(100), std::optional<std::int64_t>(256)); // 128 tokens: the hole is 64
  EXPECT_EQ(a.allocate(10), std::optional<std::int64_t>(64));   // 64 tokens: the hole fits
  EXPECT_EQ(a.free_tokens(), 1024 - 384);
  EXPECT_EQ(a.largest_free(), 1024 - 384); // [384, 1024)
}

// Five blocks of 64 at 0..320, then [320, 512) free; releases merge with the right neighbour,
// the left one, and both.
TEST(kv_block_allocator, freed_blocks_merge_with_free_neighbours) {
  kv_block_allocator a(512, 64);
  for (std::int64_t k = 0; k < 5; ++k)
    ASSERT_EQ(a.allocate(64), std::optional<std::int64_t>(64 * k));
  EXPECT_EQ(a.largest_free(), 192);

  a.release(256); // right neighbour [320, 512): one run [256, 512)
  EXPECT_EQ(a.largest_free(), 256);
  EXPECT_EQ(a.allocate(256), std::optional<std::int64_t>(256)); // fits only if merged
  a.release(256);

  a.release(64);  // a lone hole [64, 128)
  a.release(128); // left neighbour [64, 128): one run [64, 192)
  EXPECT_EQ(a.free_tokens(), 128 + 256);
  EXPECT_EQ(a.largest_free(), 256);
  EXPECT_EQ(a.allocate(128), std::optional<std::int64_t>(64)); // fits only if merged
  a.release(64);

  a.release(192); // both: [64, 192) + [192, 256) + [256, 512) = [64, 512)
  EXPECT_EQ(a.free_tokens(), 448);
  EXPECT_EQ(a.largest_free(), 448);
  EXPECT_EQ(a.allocate(448), std::optional<std::int64_t>(64));
  EXPECT_EQ(a.free_tokens(), 0);
  EXPECT_EQ(a.largest_free(), 0);
  EXPECT_EQ(a.allocate(1), std::nullopt);

  a.release(0);
  a.release(64); // back to one run: the whole pool
  EXPECT_EQ(a.free_tokens(), 512);
  EXPECT_EQ(a.largest_free(), 512);
}

// Two holes of 64: 128 tokens free, yet no block of 128 fits -- what a token counter misses.
TEST(kv_block_allocator, fragmentation_refuses_what_free_tokens_would_allow) {
  kv_block_allocator a(256, 64);
  for (std::int64_t k = 0; k < 4; ++k)
    ASSERT_EQ(a.allocate(64), std::optional<std::int64_t>(64 * k));
  a.release(0);
  a.release(128);
  EXPECT_EQ(a.free_tokens(), 128);
  EXPECT_EQ(a.largest_free(), 64);
  EXPECT_EQ(a.allocate(128), std::nullopt);
  EXPECT_EQ(a.allocate(65), std::nullopt);
  EXPECT_EQ(a.allocate(64), std::optional<std::int64_t>(0));
}

// Capacity 100, granule 64: the 36-token tail counts as free but holds no rounded block.
TEST(kv_block_allocator, a_tail_shorter_than_a_granule_is_free_but_never_fits) {
  kv_block_allocator a(100, 64);
  EXPECT_EQ(a.allocate(100), std::nullopt); // rounds to 128
  EXPECT_EQ(a.allocate(30), std::optional<std::int64_t>(0));
  EXPECT_EQ(a.free_tokens(), 36);
  EXPECT_EQ(a.largest_free(), 36);
  EXPECT_EQ(a.allocate(1), std::nullopt);
  a.release(0);
  EXPECT_EQ(a.free_tokens(), 100);
  EXPECT_EQ(a.largest_free(), 100);
}

TEST(kv_block_allocator, bad_arguments_and_unknown_blocks_throw) {
  EXPECT_THROW(kv_block_allocator(63, 64), std::invalid_argument);
  EXPECT_THROW(kv_block_allocator(0, 64), std::invalid_argument);
  EXPECT_THROW(kv_block_allocator(64, 0), std::invalid_argument);
  EXPECT_THROW(kv_block_allocator(64, -1), std::invalid_argument);
  EXPECT_NO_THROW(kv_block_allocator(64, 64));
  EXPECT_NO_THROW(kv_block_allocator(1, 1));

  kv_block_allocator a(512, 64);
  EXPECT_THROW(a.allocate(0), std::invalid_argument);
  EXPECT_THROW(a.allocate(-5), std::invalid_argument);
  EXPECT_EQ(a.allocate(513), std::nullopt);
  EXPECT_EQ(a.allocate(std::numeric_limits<std::int64_t>::max()), std::nullopt); // no overflow
  ASSERT_EQ(a.allocate(100), std::optional<std::int64_t>(0));
  EXPECT_THROW(a.release(64), std::logic_error); // free
  EXPECT_THROW(a.release(32), std::logic_error); // inside the block, not its start
  EXPECT_THROW(a.release(-1), std::logic_error); // outside the pool
  EXPECT_THROW(a.block_tokens(64), std::logic_error);
  a.release(0);
  EXPECT_THROW(a.release(0), std::logic_error); // twice
  EXPECT_THROW(a.block_tokens(0), std::logic_error);
  EXPECT_EQ(a.free_tokens(), 512);
}

namespace {

// The pool token by token: the reference the allocator must agree with.
struct pool_model {
  std::vector<bool> used;
  std::int64_t granule;

  // The lowest start of `tokens` free tokens in a row, as a linear scan finds it.
  std::optional<std::int64_t> lowest_fit(std::int64_t tokens) const {
    std::int64_t run = 0;
    for (std::size_t i = 0; i < used.size(); ++i) {
      run = used[i] ? 0 : run + 1;
      if (run == tokens) return static_cast<std::int64_t>(i) + 1 - tokens;
    }
    return std::nullopt;
  }
  void mark(std::int64_t start, std::int64_t tokens, bool value) {
    for (std::int64_t i = start; i < start + tokens; ++i)
      used[static_cast<std::size_t>(i)] = value;
  }
  std::int64_t free_tokens() const {
    std::int64_t n = 0;
    for (const bool u : used)
      n += u ? 0 : 1;
    return n;
  }
  std::int64_t largest_free() const {
    std::int64_t run = 0, best = 0;
    for (const bool u : used) {
      run = u ? 0 : run + 1;
      best = std::max(best, run);
    }
    return best;
  }
};

void check_against_model(std::int64_t capacity, std::int64_t granule, std::uint64_t stream) {
  SCOPED_TRACE("capacity " + std::to_string(capacity) + ", granule " + std::to_string(granule));
  kv_block_allocator a(capacity, granule);
  pool_model m{std::vector<bool>(static_cast<std::size_t>(capacity), false), granule};
  std::vector<std::int64_t> live; // block starts
  rng r(20261201, stream);
  int refused = 0, merged_to_whole = 0;
  for (int op = 0; op < 4000; ++op) {
    // Phases of 500 operations alternate 70% and 30% allocations: the pool fills and fragments,
    // then drains back to empty.
    const std::uint64_t allocate_tenths = (op / 500) % 2 == 0 ? 7 : 3;
    if (live.empty() || r.below(10) < allocate_tenths) {
      const auto tokens =
          static_cast<std::int64_t>(1 + r.below(static_cast<std::uint64_t>(capacity / 6)));
      const std::int64_t rounded = (tokens + granule - 1) / granule * granule;
      const auto want = m.lowest_fit(rounded);
      const auto got = a.allocate(tokens);
      ASSERT_EQ(got, want) << "op " << op << ": allocate(" << tokens << ")";
      if (got) {
        EXPECT_EQ(a.block_tokens(*got), rounded);
        m.mark(*got, rounded, true);
        live.push_back(*got);
      } else {
        ++refused;
      }
    } else {
      const auto k = static_cast<std::size_t>(r.below(live.size()));
      const std::int64_t start = live[k];
      m.mark(start, a.block_tokens(start), false);
      a.release(start);
      live[k] = live.back();
      live.pop_back();
      if (live.empty()) ++merged_to_whole;
    }
    ASSERT_EQ(a.free_tokens(), m.free_tokens()) << "op " << op;
    ASSERT_EQ(a.largest_free(), m.largest_free()) << "op " << op;
  }
  // The workload reached the interesting states: full enough to refuse, and emptied back to one
  // run (merging everything) at least once.
  EXPECT_GT(refused, 0);
  EXPECT_GT(merged_to_whole, 0);
  for (const auto start : live)
    a.release(start);
  EXPECT_EQ(a.free_tokens(), capacity);
  EXPECT_EQ(a.largest_free(), capacity);
}

} // namespace

TEST(kv_block_allocator, agrees_with_a_token_model_on_a_seeded_random_workload) {
  check_against_model(4000, 64, 1); // a 32-token tail
  check_against_model(1000, 1, 2);  // no rounding
  check_against_model(3072, 48, 3);
}
