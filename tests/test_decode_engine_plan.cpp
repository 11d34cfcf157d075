// The decode engine's host bookkeeping without a GPU: sizes against hand counts, the serving
// engine's pool, the slot pool.
#include <set>
#include <stdexcept>

#include <gtest/gtest.h>

#include "workloads/arrivals.h"
#include "workloads/continuous_batching.h"
#include "workloads/decode_engine_plan.h"

using namespace kg;

TEST(decode_engine_plan, qwen3_4b_sizes) {
  const decode_engine_config c; // Qwen3-4B, 32 slots of 8448 tokens
  const auto s = decode_engine_sizes_of(c);
  EXPECT_EQ(s.qkv_width, 6144);
  const std::int64_t layer =
      2 * 2560 + 2 * 128 + 6144LL * 2560 + 2560LL * 4096 + 2 * 9728LL * 2560 + 2560LL * 9728;
  EXPECT_EQ(s.layer_weight_elements, layer);
  EXPECT_EQ(s.weight_elements, 36 * layer + 151936LL * 2560 + 2560);
  // 36 layers x K and V x 8 heads x 128 x 2 bytes = 147456 bytes a token (kv_bytes_per_token).
  EXPECT_EQ(s.kv_cache_bytes, kv_bytes_per_token(c.model) * 32 * 8448);
  EXPECT_NO_THROW(validate_decode_engine_config(c));
  EXPECT_NO_THROW(validate_decode_engine_config(tiny_decode_engine_config()));
}

TEST(decode_engine_plan, configurations_the_kernels_cannot_take_are_refused) {
  auto c = tiny_decode_engine_config();
  c.model.head_dim = 96;
  EXPECT_THROW(validate_decode_engine_config(c), std::invalid_argument);
  c = tiny_decode_engine_config();
  c.model.q_heads = 6; // group 3
  c.model.kv_heads = 2;
  EXPECT_THROW(validate_decode_engine_config(c), std::invalid_argument);
  c = tiny_decode_engine_config();
  c.model.hidden = 250;
  EXPECT_THROW(validate_decode_engine_config(c), std::invalid_argument);
}

TEST(decode_engine_plan, slot_pool_hands_out_lowest_first_and_checks_releases) {
  kv_slot_pool p(3);
  EXPECT_EQ(p.acquire(), 0);
  EXPECT_EQ(p.acquire(), 1);
  EXPECT_EQ(p.acquire(), 2);
  EXPECT_THROW(p.acquire(), std::logic_error);
  p.release(1);
  EXPECT_EQ(p.free_slots(), 1);
  EXPECT_EQ(p.acquire(), 1);
  EXPECT_THROW(p.release(5), std::logic_error);
  p.release(0);
  EXPECT_THROW(p.release(0), std::logic_error);
}

TEST(decode_engine_plan, serving_engine_takes_the_pool_that_fits_beside_its_weights) {
  const std::int64_t gib = std::int64_t{1} << 30, reserve = 4 * gib;
  const auto c = serving_engine_config(139 * gib, reserve, 256, 512);
  EXPECT_NO_THROW(validate_decode_engine_config(c));
  EXPECT_EQ(c.max_batch, 256);
  EXPECT_EQ(c.max_prefill_tokens, 512);
  const auto s = decode_engine_sizes_of(c);
  // Weights (twice: a packed copy may double them), activations, reserve and pool within the
  // free bytes; one more token would not be.
  const std::int64_t fixed = 2 * s.weight_elements * 2 + s.activation_bytes + reserve;
  EXPECT_EQ(s.kv_cache_bytes, c.kv_pool_tokens * 147456);
  EXPECT_LE(fixed + s.kv_cache_bytes, 139 * gib);
  EXPECT_GT(fixed + s.kv_cache_bytes + 147456, 139 * gib);
  // >= 128 sequences of the 2048..8192 band's mean (5120 + 256 outputs) fit.
  EXPECT_GE(c.kv_pool_tokens, 128 * 5376);
  // Capped at a full max_context block per sequence when memory is plentiful.
  EXPECT_EQ(serving_engine_config(1024 * gib, reserve, 8, 512).kv_pool_tokens, 8 * 8448);
  // Too little memory for one sequence beside the weights.
  EXPECT_THROW(serving_engine_config(20 * gib, reserve), std::invalid_argument);
}

TEST(decode_engine_plan, pool_and_prefill_sizes_are_checked) {
  auto c = tiny_decode_engine_config();
  c.kv_pool_tokens = c.max_context - 1; // not one whole sequence
  EXPECT_THROW(validate_decode_engine_config(c), std::invalid_argument);
  c = tiny_decode_engine_config();
  c.max_prefill_tokens = -1;
  EXPECT_THROW(validate_decode_engine_config(c), std::invalid_argument);
  c = tiny_decode_engine_config();
  c.max_gemv_batch = 257; // the engine's largest batch is 256 (128-row launches above 128)
  EXPECT_THROW(validate_decode_engine_config(c), std::invalid_argument);
  c.max_gemv_batch = 0;
  EXPECT_THROW(validate_decode_engine_config(c), std::invalid_argument);
  for (const int b : {128, 129, 256}) {
    c.max_gemv_batch = b;
    EXPECT_NO_THROW(validate_decode_engine_config(c)) << b;
  }
  EXPECT_EQ(gemv_launch_rows, 128);
  c = tiny_decode_engine_config();
  c.kv_pool_tokens = 3000;
  EXPECT_EQ(kv_pool_tokens_of(c), 3000);
  EXPECT_EQ(decode_engine_sizes_of(c).kv_cache_bytes, 3000LL * 2 * 2 * 2 * 64 * 2);
  c.kv_pool_tokens = 0;
  EXPECT_EQ(kv_pool_tokens_of(c), 8 * 1024);
}
