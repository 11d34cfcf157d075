// The decode engine's host bookkeeping without a GPU: sizes against hand counts, the slot pool,
// and the row tracker driven by the real continuous-batching loop (it throws on any drift).
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

TEST(decode_engine_plan, tracker_follows_the_batching_loop_with_distinct_slots) {
  arrival_options a;
  a.requests_per_second = 4;
  a.duration_seconds = 5;
  a.output_tokens = 16;
  a.seed = 3;
  const auto requests = generate_arrivals(a);
  batching_options o;
  o.max_batch = 8;
  o.kv_capacity_tokens = 8 * 8448;
  decode_row_tracker t(8, a.output_tokens);
  std::int64_t decoded = 0;
  const auto r = run_continuous_batching(
      requests,
      [&](const step_plan& plan) {
        const auto rows = t.begin(plan); // throws if its rows drift from the loop's
        std::set<int> slots;
        for (const auto& x : rows.decode) {
          slots.insert(x.slot);
          EXPECT_EQ(x.position() + 1, x.context + x.generated);
        }
        for (const auto& x : rows.admitted)
          slots.insert(x.slot);
        EXPECT_EQ(slots.size(), rows.decode.size() + rows.admitted.size()) << "a slot used twice";
        decoded += static_cast<std::int64_t>(rows.decode.size());
        t.end(std::vector<int>(rows.decode.size(), 1), std::vector<int>(rows.admitted.size(), 2));
        return 1e-3 * (1 + static_cast<double>(rows.decode.size()));
      },
      o);
  EXPECT_GT(decoded, 0);
  EXPECT_EQ(t.running(), 0); // every sequence finished and gave its slot back
  EXPECT_FALSE(r.truncated);
}

TEST(decode_engine_plan, tracker_refuses_a_plan_that_drifted) {
  decode_row_tracker t(4, 3);
  step_plan p;
  p.prefill_contexts = {100};
  t.begin(p);
  t.end({}, {7});
  step_plan wrong;
  wrong.decode_lengths = {102}; // the running sequence has length 101
  EXPECT_THROW(t.begin(wrong), std::logic_error);
}
