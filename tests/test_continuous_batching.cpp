// The decode engine's continuous-batching loop on hand-worked traces (no GPU: the step is a cost
// model), and the throughput-at-latency-limit search driven through it.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "workloads/continuous_batching.h"
#include "workloads/load_search.h"

using namespace kg;

namespace {
request req(double at, std::vector<std::int64_t> contexts, std::int64_t out) {
  request r;
  r.arrival_seconds = at;
  r.contexts = std::move(contexts);
  r.output_tokens = out;
  return r;
}
double constant_10ms(const step_plan&) {
  return 0.010;
}
} // namespace

// One sequence, 3 output tokens, 10 ms steps: tokens at 10, 20, 30 ms; intervals 10 and 10.
TEST(continuous_batching, one_sequence_gets_one_token_per_step) {
  const auto r = run_continuous_batching({req(0, {100}, 3)}, constant_10ms);
  ASSERT_EQ(r.sequences.size(), 1u);
  const std::vector<double> want = {0.010, 0.020, 0.030};
  ASSERT_EQ(r.sequences[0].token_seconds.size(), 3u);
  for (std::size_t k = 0; k < 3; ++k)
    EXPECT_NEAR(r.sequences[0].token_seconds[k], want[k], 1e-12);
  EXPECT_EQ(r.steps, 3);
  EXPECT_EQ(r.tokens, 3);
  EXPECT_NEAR(r.p99_itl_ms(), 10.0, 1e-9);
  EXPECT_NEAR(r.tokens_per_second(), 100.0, 1e-9);
}

// Step cost 5 ms + 1 ms per sequence touched (prefill or decode). Two sequences arrive together
// with 2 tokens each: step 1 prefills both (7 ms: tokens at 7), step 2 decodes both (7 ms: tokens
// at 14), both done. A third arrives at 20 ms to an idle engine: the clock jumps to 20, its
// tokens come at 26 and 32.
TEST(continuous_batching, batch_cost_and_an_idle_gap_set_the_clock) {
  const auto cost = [](const step_plan& p) {
    return 0.005 + 0.001 * static_cast<double>(p.prefill_contexts.size() + p.decode_lengths.size());
  };
  const auto r = run_continuous_batching({req(0, {100, 200}, 2), req(0.020, {300}, 2)}, cost);
  ASSERT_EQ(r.sequences.size(), 3u);
  EXPECT_NEAR(r.sequences[0].token_seconds[0], 0.007, 1e-12);
  EXPECT_NEAR(r.sequences[1].token_seconds[1], 0.014, 1e-12);
  EXPECT_NEAR(r.sequences[2].token_seconds[0], 0.026, 1e-12);
  EXPECT_NEAR(r.sequences[2].token_seconds[1], 0.032, 1e-12);
  EXPECT_NEAR(r.end_seconds, 0.032, 1e-12);
  EXPECT_EQ(r.steps, 4);
  EXPECT_EQ(r.max_batch_seen, 2);
  EXPECT_EQ(r.batch_histogram[0], 2); // the two prefill-only steps
  EXPECT_EQ(r.batch_histogram[2], 1);
  EXPECT_EQ(r.batch_histogram[1], 1);
}

// max_batch 1: the second sequence waits for the first to finish (3 steps), then takes 3 steps.
// Its intervals are still one step each: waiting before the first token is not an interval.
TEST(continuous_batching, a_full_batch_makes_arrivals_wait_before_their_first_token) {
  batching_options o;
  o.max_batch = 1;
  const auto r = run_continuous_batching({req(0, {10, 10}, 3)}, constant_10ms, o);
  EXPECT_NEAR(r.sequences[1].token_seconds[0], 0.040, 1e-12);
  EXPECT_NEAR(r.sequences[1].token_seconds[2], 0.060, 1e-12);
  EXPECT_NEAR(r.p99_itl_ms(), 10.0, 1e-9);
  EXPECT_EQ(r.max_batch_seen, 1);
}

// KV capacity 250 tokens: sequences need 100 + 2 and 120 + 2 (fits together: 224) and 50 + 2
// (would make 276: waits until one finishes). FIFO: it is admitted in the step after the first
// two finish (they finish together at step 2).
TEST(continuous_batching, kv_capacity_holds_back_admission_until_memory_frees) {
  batching_options o;
  o.kv_capacity_tokens = 250;
  const auto r = run_continuous_batching({req(0, {100, 120, 50}, 2)}, constant_10ms, o);
  EXPECT_NEAR(r.sequences[0].token_seconds[0], 0.010, 1e-12);
  EXPECT_NEAR(r.sequences[1].token_seconds[0], 0.010, 1e-12);
  EXPECT_NEAR(r.sequences[2].token_seconds[0], 0.030, 1e-12);
  o.kv_capacity_tokens = 100; // 100 + 2 can never fit
  EXPECT_THROW(run_continuous_batching({req(0, {100}, 2)}, constant_10ms, o),
               std::invalid_argument);
}

// The load search over the loop: a step costing 2 ms + 0.5 ms per sequence and 0.01 ms per
// 1000 context tokens; the p99 ITL rises with offered load and the search stops at the limit.
TEST(continuous_batching, the_load_search_finds_a_throughput_within_the_latency_limit) {
  const auto cost = [](const step_plan& p) {
    double s = 0.002;
    for (const auto c : p.prefill_contexts)
      s += 0.0005 + 1e-8 * static_cast<double>(c);
    for (const auto l : p.decode_lengths)
      s += 0.0005 + 1e-8 * static_cast<double>(l);
    return s;
  };
  auto measure = [&](double rps) {
    arrival_options a;
    a.requests_per_second = rps;
    a.duration_seconds = 20;
    a.seed = 3;
    const auto r = run_continuous_batching(generate_arrivals(a), cost);
    return load_point{rps, r.p99_itl_ms(), r.tokens_per_second()};
  };
  load_search_options o;
  o.start_rps = 0.5;
  o.limit_ms = 12.0;
  const auto s = search_load(measure, o);
  ASSERT_TRUE(s.found);
  EXPECT_LE(s.best.p99_itl_ms, 12.0);
  EXPECT_GT(s.points.back().p99_itl_ms, 12.0); // the next step up broke the limit
  // A batch of 32 costs 2 + 16 ms > 12 ms: the best load keeps batches below about 20.
  EXPECT_GT(s.best.tokens_per_second, 0.0);
}

TEST(continuous_batching, mean_batch_averages_the_histogram_over_steps) {
  batching_result r;
  EXPECT_EQ(r.mean_batch(), 0.0);      // no step
  r.batch_histogram = {1, 0, 3, 0, 2}; // 1 idle step, 3 of 2 sequences, 2 of 4
  EXPECT_DOUBLE_EQ(r.mean_batch(), (0.0 * 1 + 2.0 * 3 + 4.0 * 2) / 6.0);
}
