// The continuous-batching loop's warm start (batching_options::measure_from_seconds) on
// hand-worked traces: which steps are simulated, where the window opens, and what the window's
// measures count; then a Poisson load whose steady-state batch Little's law gives by hand.
#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "batching_requests.h"
#include "workloads/arrivals.h"
#include "workloads/continuous_batching.h"

using namespace kg;
using kg::test::req;

// One sequence of 6 tokens, 10 ms steps beginning at 0, 10, ..., 50 ms (the first prefills and
// gives token 1). The window is asked from 25 ms: the steps beginning at 0, 10 and 20 ms are
// simulated; the one from 20 to 30 ms straddles 25, so the window opens at 30 ms. In it: the
// steps at 30, 40, 50 ms (3 tokens, at 40, 50, 60 ms), 3 / 30 ms = 100 tokens/s, and the gaps
// from the tokens at 30, 40, 50 ms, each 10 ms.
TEST(batching_warm_start, steps_before_the_window_are_simulated_and_not_counted) {
  batching_options o;
  o.measure_from_seconds = 0.025;
  std::vector<bool> simulated;
  const auto r = run_continuous_batching(
      {req(0, {100}, 6)},
      [&](const step_plan& p) {
        simulated.push_back(p.simulated);
        return 0.010;
      },
      o);
  EXPECT_EQ(simulated, (std::vector<bool>{true, true, true, false, false, false}));
  EXPECT_NEAR(r.window_start_seconds, 0.030, 1e-12);
  EXPECT_EQ(r.simulated_steps, 3);
  EXPECT_EQ(r.steps, 3);
  EXPECT_EQ(r.tokens, 3);
  EXPECT_EQ(r.prefill_steps, 0);
  EXPECT_EQ(r.prefill_tokens, 0);
  EXPECT_EQ(r.running_at_window_start, 1);
  EXPECT_EQ(r.waiting_at_window_start, 0);
  EXPECT_NEAR(r.tokens_per_second(), 100.0, 1e-9);
  EXPECT_NEAR(r.p99_itl_ms(), 10.0, 1e-9);
  EXPECT_EQ(r.sequences[0].token_seconds.size(), 6u); // every token's time is kept
}

// A finishes (2 tokens) by 20 ms in the warm-up; the server idles until B arrives at 100 ms; the
// window asked from 50 ms opens at 50 ms (idle time counts), with nothing running or waiting.
// B's 2 tokens at 110 and 120 ms: 2 / 70 ms; one gap of 10 ms.
TEST(batching_warm_start, an_idle_stretch_across_the_start_opens_the_window_on_time) {
  batching_options o;
  o.measure_from_seconds = 0.050;
  const auto r = run_continuous_batching(
      {req(0, {10}, 2), req(0.100, {10}, 2)}, [](const step_plan&) { return 0.010; }, o);
  EXPECT_NEAR(r.window_start_seconds, 0.050, 1e-12);
  EXPECT_EQ(r.simulated_steps, 2);
  EXPECT_EQ(r.steps, 2);
  EXPECT_EQ(r.running_at_window_start, 0);
  EXPECT_EQ(r.waiting_at_window_start, 0);
  EXPECT_NEAR(r.tokens_per_second(), 2.0 / 0.070, 1e-9);
  EXPECT_NEAR(r.p99_itl_ms(), 10.0, 1e-9);
  EXPECT_TRUE(r.has_inter_token_interval());
}

// Two slots: A (2 tokens) and B (10) run from 0 ms, C waits. A's second token at 20 ms ends it;
// the window asked from 15 ms opens with the step at 20 ms, whose admission gives A's slot to C:
// that step runs B and C, so the window opens on 2 running and none waiting (not on the freed
// slot before it is refilled).
TEST(batching_warm_start, a_slot_freed_at_the_start_is_refilled_before_the_counts) {
  batching_options o;
  o.max_batch = 2;
  o.measure_from_seconds = 0.015;
  std::vector<std::size_t> first_rows;
  const auto r = run_continuous_batching(
      {req(0, {10}, 2), req(0, {10}, 10), req(0, {10}, 5)},
      [&](const step_plan& p) {
        if (!p.simulated && first_rows.empty())
          first_rows.push_back(p.decode_lengths.size() + p.prefills.size());
        return 0.010;
      },
      o);
  EXPECT_NEAR(r.window_start_seconds, 0.020, 1e-12);
  EXPECT_EQ(r.simulated_steps, 2);
  EXPECT_EQ(r.running_at_window_start, 2);
  EXPECT_EQ(r.waiting_at_window_start, 0);
  EXPECT_EQ(first_rows, (std::vector<std::size_t>{2})); // B decodes, C prefills
}

// A loop that ends inside its warm-up has an empty window at its end: no tokens, no interval.
TEST(batching_warm_start, a_loop_that_ends_in_its_warm_up_has_an_empty_window) {
  batching_options o;
  o.measure_from_seconds = 1.0;
  const auto r = run_continuous_batching(
      {req(0, {10}, 3)}, [](const step_plan&) { return 0.010; }, o);
  EXPECT_NEAR(r.window_start_seconds, r.end_seconds, 1e-12);
  EXPECT_EQ(r.steps, 0);
  EXPECT_EQ(r.simulated_steps, 3);
  EXPECT_EQ(r.tokens_per_second(), 0.0);
  EXPECT_FALSE(r.has_inter_token_interval());
}

// A KV counter of 250 tokens: B (102) waits while A (202) runs, refused at the steps beginning
// at 0 and 10 ms; A's second token ends it at 20 ms and B is admitted. Both refusals fall in a
// warm-up to 25 ms and count only without it.
TEST(batching_warm_start, kv_refusals_count_in_the_window_only) {
  batching_options o;
  o.kv_capacity_tokens = 250;
  const std::vector<request> load = {req(0, {200}, 2), req(0, {100}, 2)};
  const auto ten_ms = [](const step_plan&) { return 0.010; };
  EXPECT_EQ(run_continuous_batching(load, ten_ms, o).kv_refusals, 2);
  o.measure_from_seconds = 0.025;
  EXPECT_EQ(run_continuous_batching(load, ten_ms, o).kv_refusals, 0);
}

// Without a warm-up every step is real and the window is the whole run.
TEST(batching_warm_start, no_warm_up_counts_every_step) {
  const auto r = run_continuous_batching({req(0, {10}, 3)}, [](const step_plan& p) {
    EXPECT_FALSE(p.simulated);
    return 0.010;
  });
  EXPECT_EQ(r.window_start_seconds, 0.0);
  EXPECT_EQ(r.simulated_steps, 0);
  EXPECT_EQ(r.steps, 3);
}

// Poisson arrivals of 50 sequences/s, 100 output tokens each, steps of 1 ms + 0.1 ms per decode
// row. Little's law by hand: L = 50/s x 100 steps x (1 + 0.1 L) ms = 5 + 0.5 L, so L = 10 in the
// steady state, and a sequence lives 0.2 s. A 0.2 s window right after an empty start sees the
// batch filling: with B(t) = 50 t, the steps' mean batch is 4.4 (the integral of B / (1 + 0.1 B)
// over that of 1 / (1 + 0.1 B)). After a 2 s warm-up, a 1 s window's mean batch is near 10.
TEST(batching_warm_start, a_warm_window_sees_the_steady_batch_a_cold_one_does_not) {
  arrival_options a;
  a.requests_per_second = 50;
  a.request_sizes = {1};
  a.size_weights = {1};
  a.output_tokens = 100;
  a.min_context = a.max_context = 16;
  a.seed = 7;
  const auto cost = [](const step_plan& p) {
    return 1e-3 + 1e-4 * static_cast<double>(p.decode_lengths.size());
  };
  batching_options cold;
  cold.max_batch = 64;
  a.duration_seconds = 0.2;
  cold.max_seconds = 0.2;
  const double cold_batch = run_continuous_batching(generate_arrivals(a), cost, cold).mean_batch();
  batching_options warm = cold;
  a.duration_seconds = 3.0;
  warm.measure_from_seconds = 2.0;
  warm.max_seconds = 3.0;
  const auto r = run_continuous_batching(generate_arrivals(a), cost, warm);
  EXPECT_GT(r.simulated_steps, 0);
  EXPECT_GT(r.mean_batch(), 8.0);
  EXPECT_LT(r.mean_batch(), 12.0);
  EXPECT_LT(cold_batch, 6.5);
  EXPECT_GT(r.running_at_window_start, 0);
}

// The log-uniform band's mean by hand: (2048 - 512) / ln 4 = 1107.98; one value is itself.
TEST(warm_arrivals, mean_context_of_a_log_uniform_band) {
  arrival_options a;
  a.min_context = 512;
  a.max_context = 2048;
  EXPECT_NEAR(mean_context(a), 1536.0 / std::log(4.0), 1e-9);
  a.min_context = a.max_context = 700;
  EXPECT_EQ(mean_context(a), 700.0);
}

// The window is the plain trace moved by the warm-up, whatever its length; the warm-up's
// arrivals lie before it, and the last seconds of a short warm-up are those of a long one.
TEST(warm_arrivals, the_window_keeps_its_seed_and_the_warm_up_counts_back_from_it) {
  arrival_options a;
  a.requests_per_second = 20;
  a.duration_seconds = 1.5;
  a.seed = 11;
  const auto plain = generate_arrivals(a);
  const auto short_warm = generate_warm_arrivals(a, 3.0),
             long_warm = generate_warm_arrivals(a, 5.0);
  ASSERT_GE(short_warm.size(), plain.size());
  const std::size_t n_short = short_warm.size() - plain.size();
  for (std::size_t i = 0; i < plain.size(); ++i) {
    EXPECT_NEAR(short_warm[n_short + i].arrival_seconds, plain[i].arrival_seconds + 3.0, 1e-12);
    EXPECT_EQ(short_warm[n_short + i].contexts, plain[i].contexts);
  }
  EXPECT_GT(n_short, 30u); // about 60 at 20/s over 3 s
  for (std::size_t i = 0; i < n_short; ++i) {
    EXPECT_LT(short_warm[i].arrival_seconds, 3.0);
    EXPECT_GE(short_warm[i].arrival_seconds, 0.0);
    if (i > 0) {
      EXPECT_LE(short_warm[i - 1].arrival_seconds, short_warm[i].arrival_seconds);
    }
  }
  // The last n_short warm-up arrivals of the 5 s warm-up, 2 s later, are the 3 s warm-up's.
  const std::size_t n_long = long_warm.size() - plain.size();
  ASSERT_GE(n_long, n_short);
  for (std::size_t i = 0; i < n_short; ++i) {
    const auto& l = long_warm[n_long - n_short + i];
    EXPECT_NEAR(l.arrival_seconds, short_warm[i].arrival_seconds + 2.0, 1e-9);
    EXPECT_EQ(l.contexts, short_warm[i].contexts);
  }
}
