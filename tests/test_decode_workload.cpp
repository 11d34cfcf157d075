// CPU side of the decode workload: Qwen3-4B shape and byte bookkeeping, the seeded arrival
// process, and the throughput-at-latency-limit search. Expected values are worked by hand.
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "workloads/arrivals.h"
#include "workloads/load_search.h"
#include "workloads/qwen3.h"

using namespace kg;

TEST(qwen3, gemm_shapes_and_kv_bytes_match_the_model) {
  const auto g = decode_gemms();
  ASSERT_EQ(g.size(), 5u);
  // qkv: 32 query heads + 2 x 8 KV heads, x 128 = 4096 + 2048 = 6144 rows of 2560.
  EXPECT_EQ(g[0].n, 6144);
  EXPECT_EQ(g[0].k, 2560);
  EXPECT_EQ(g[1].n, 2560); // o_proj 2560 x 4096
  EXPECT_EQ(g[1].k, 4096);
  EXPECT_EQ(g[2].n, 19456); // gate_up: 2 x 9728
  EXPECT_EQ(g[3].n, 2560);  // down 2560 x 9728
  EXPECT_EQ(g[3].k, 9728);
  EXPECT_EQ(g[4].n, 151936); // lm_head
  // 36 layers x (K and V) x 8 heads x 128 x 2 bytes = 147456 = 144 KiB per token.
  EXPECT_EQ(kv_bytes_per_token(), 147456);
}

TEST(qwen3, rooflines_count_each_byte_once) {
  const auto down = decode_gemms()[3];
  // Batch 1: weight 2560 x 9728 x 2 = 49,807,360 B (the 49.8 MB of docs/architecture.md's Qwen3-4B
  // stack), plus x (9728 x 2) and y (2560 x 2): 49,831,936 B; FLOPs 2 x 2560 x 9728 = 49,807,360.
  const auto r = gemm_roofline(down, 1);
  EXPECT_DOUBLE_EQ(r.bytes, 49831936.0);
  EXPECT_DOUBLE_EQ(r.flops, 49807360.0);
  // Attention, batch 8, context 8192, one layer: K and V 2 x 8 x 8 x 8192 x 128 x 2 B =
  // 268,435,456 B plus q and o 2 x 8 x 32 x 128 x 2 B = 131,072 B.
  EXPECT_DOUBLE_EQ(attention_roofline(8, 8192).bytes, 268435456.0 + 131072.0);
  // Decode step, batch 1, context 2048: 36 x (31,474,688 + 20,984,832 + 99,658,752 + 49,831,936)
  // + 778,221,312 (lm_head once) = 8,048,428,800 B of GEMMs, plus 36 x 8,404,992 B of attention
  // (2 x (2 x 8 x 2048 x 128 + 2 x 32 x 128)) = 8,351,008,512 B.
  EXPECT_DOUBLE_EQ(decode_step_roofline(1, 2048).bytes, 8351008512.0);
}

TEST(arrivals, poisson_rate_request_mix_and_log_uniform_contexts) {
  arrival_options o;
  o.requests_per_second = 2.0;
  o.duration_seconds = 1000.0;
  o.seed = 11;
  const auto a = generate_arrivals(o);
  // Expected 2000 arrivals, sd sqrt(2000) = 45: within 3.5 sd.
  EXPECT_NEAR(static_cast<double>(a.size()), 2000.0, 160.0);
  int ones = 0, twos = 0, fours = 0, eights = 0;
  std::vector<double> ctx;
  double last = 0;
  for (const auto& r : a) {
    EXPECT_GE(r.arrival_seconds, last);
    last = r.arrival_seconds;
    EXPECT_EQ(r.output_tokens, 256);
    switch (r.contexts.size()) {
    case 1:
      ++ones;
      break;
    case 2:
      ++twos;
      break;
    case 4:
      ++fours;
      break;
    case 8:
      ++eights;
      break;
    default:
      ADD_FAILURE() << "request of " << r.contexts.size() << " sequences";
    }
    for (auto c : r.contexts) {
      EXPECT_GE(c, 512);
      EXPECT_LE(c, 8192);
      ctx.push_back(static_cast<double>(c));
    }
  }
  const double n = static_cast<double>(a.size());
  // 40/30/20/10%; with ~2000 requests the sd of a share is <= 0.011.
  EXPECT_NEAR(ones / n, 0.40, 0.04);
  EXPECT_NEAR(twos / n, 0.30, 0.04);
  EXPECT_NEAR(fours / n, 0.20, 0.04);
  EXPECT_NEAR(eights / n, 0.10, 0.03);
  // Log-uniform on [512, 8192]: median sqrt(512 x 8192) = 2048.
  std::nth_element(ctx.begin(), ctx.begin() + static_cast<long>(ctx.size() / 2), ctx.end());
  EXPECT_NEAR(ctx[ctx.size() / 2], 2048.0, 205.0);
  // The same seed gives the same trace; another seed another one.
  const auto again = generate_arrivals(o);
  ASSERT_EQ(again.size(), a.size());
  EXPECT_EQ(again[100].arrival_seconds, a[100].arrival_seconds);
  EXPECT_EQ(again[100].contexts, a[100].contexts);
  o.seed = 12;
  EXPECT_NE(generate_arrivals(o)[0].arrival_seconds, a[0].arrival_seconds);
}

TEST(load_search, raises_load_in_5_percent_steps_until_p99_breaks_the_limit) {
  // Synthetic engine: p99 = 10 ms + 4 ms per request/s, so the limit of 50 ms holds up to 10 rps.
  auto engine = [](double rps) { return load_point{rps, 10.0 + 4.0 * rps, 256.0 * rps}; };
  load_search_options o;
  o.start_rps = 1.0;
  const auto r = search_load(engine, o);
  // 1.05^47 = 9.90 <= 10 < 1.05^48 = 10.40: 48 loads within the limit, the 49th breaks it.
  ASSERT_TRUE(r.found);
  EXPECT_EQ(r.points.size(), 49u);
  EXPECT_NEAR(r.best.offered_rps, std::pow(1.05, 47), 1e-9);
  EXPECT_GT(r.points.back().p99_itl_ms, 50.0);
  EXPECT_FALSE(r.limit_never_exceeded);
  // A load that already breaks the limit: nothing found.
  o.start_rps = 20.0;
  EXPECT_FALSE(search_load(engine, o).found);
  // An engine that never breaks it: the search stops at max_steps and says so.
  o.start_rps = 1.0;
  o.max_steps = 10;
  const auto flat = search_load([](double rps) { return load_point{rps, 1.0, rps}; }, o);
  EXPECT_TRUE(flat.limit_never_exceeded);
  EXPECT_EQ(flat.points.size(), 10u);
}

TEST(load_search, p99_inter_token_latency_excludes_the_first_token) {
  // One sequence: first token at 500 ms (its latency from arrival is not an interval), then 100
  // intervals: 98 of 10 ms and 2 of 50 ms. Nearest rank 99 of 100 sorted: the first 50.
  std::vector<double> t = {500.0};
  for (int k = 0; k < 100; ++k)
    t.push_back(t.back() + (k == 30 || k == 70 ? 50.0 : 10.0));
  EXPECT_DOUBLE_EQ(p99_inter_token_ms({t}), 50.0);
  // With one slow interval among 100, rank 99 is a 10 ms interval.
  std::vector<double> u = {0.0};
  for (int k = 0; k < 100; ++k)
    u.push_back(u.back() + (k == 30 ? 50.0 : 10.0));
  EXPECT_DOUBLE_EQ(p99_inter_token_ms({u}), 10.0);
  EXPECT_DOUBLE_EQ(p99_inter_token_ms({{1.0}}), 0.0); // a single token: no interval
}

TEST(load_search, the_inter_token_distribution_takes_nearest_ranks_over_every_sequence) {
  // Gaps 1, 2, 3, 4 (first sequence) and 10 (second): sorted 1 2 3 4 10, n = 5. Nearest rank:
  // p50 = the 3rd (ceil 2.5), p90 = the 5th (ceil 4.5), p99 = the 5th; max 10.
  const auto s = summarize_inter_token_ms({{0, 1, 3, 6, 10}, {100, 110}, {7}});
  EXPECT_EQ(s.gaps, 5u);
  EXPECT_DOUBLE_EQ(s.p50_ms, 3.0);
  EXPECT_DOUBLE_EQ(s.p90_ms, 10.0);
  EXPECT_DOUBLE_EQ(s.p99_ms, 10.0);
  EXPECT_DOUBLE_EQ(s.max_ms, 10.0);
  // 20 gaps of 1..20 ms: p50 the 10th, p90 the 18th, p99 the 20th.
  std::vector<double> t = {0};
  for (int k = 1; k <= 20; ++k)
    t.push_back(t.back() + k);
  const auto u = summarize_inter_token_ms({t});
  EXPECT_DOUBLE_EQ(u.p50_ms, 10.0);
  EXPECT_DOUBLE_EQ(u.p90_ms, 18.0);
  EXPECT_DOUBLE_EQ(u.p99_ms, 20.0);
  EXPECT_EQ(summarize_inter_token_ms({{5}}).gaps, 0u);
}

TEST(arrivals, all_one_and_all_eight_mixes_and_their_mean_size) {
  arrival_options o;
  o.requests_per_second = 5.0;
  o.duration_seconds = 100.0;
  EXPECT_DOUBLE_EQ(mean_request_size(o), 0.4 * 1 + 0.3 * 2 + 0.2 * 4 + 0.1 * 8); // 2.6
  const auto production = generate_arrivals(o);
  o.request_sizes = {8};
  o.size_weights = {1};
  EXPECT_DOUBLE_EQ(mean_request_size(o), 8.0);
  const auto eights = generate_arrivals(o);
  // The size mix has its own random stream: the arrival times do not move.
  ASSERT_EQ(eights.size(), production.size());
  for (std::size_t i = 0; i < eights.size(); ++i) {
    EXPECT_EQ(eights[i].contexts.size(), 8u);
    EXPECT_EQ(eights[i].arrival_seconds, production[i].arrival_seconds);
  }
  o.request_sizes = {1};
  for (const auto& r : generate_arrivals(o))
    EXPECT_EQ(r.contexts.size(), 1u);
  o.size_weights = {0};
  EXPECT_THROW(generate_arrivals(o), std::invalid_argument);
  o.request_sizes = {1, 2};
  EXPECT_THROW(generate_arrivals(o), std::invalid_argument);
}

TEST(load_search, bracketed_search_doubles_then_bisects_the_crossing) {
  // p99 = 10 ms + 4 ms per request/s: the limit of 50 ms holds up to 10 requests/s.
  int calls = 0;
  auto engine = [&](double rps) {
    ++calls;
    return load_point{rps, 10.0 + 4.0 * rps, 256.0 * rps};
  };
  bracketed_search_options o;
  o.start_rps = 1.0;
  o.bisections = 3;
  const auto r = search_load_bracketed(engine, o);
  // 1, 2, 4, 8 within; 16 beyond; then sqrt(8 x 16) = 11.31 beyond, sqrt(8 x 11.31) = 9.51
  // within, sqrt(9.51 x 11.31) = 10.37 beyond.
  ASSERT_TRUE(r.found);
  EXPECT_TRUE(r.crossed);
  EXPECT_FALSE(r.limit_never_exceeded);
  EXPECT_EQ(calls, 8);
  EXPECT_NEAR(r.best.offered_rps, std::sqrt(8.0 * std::sqrt(8.0 * 16.0)), 1e-9);
  EXPECT_NEAR(r.bracket_hi_rps, std::sqrt(r.best.offered_rps * std::sqrt(128.0)), 1e-9);
  EXPECT_LE(r.best.p99_itl_ms, 50.0);

  // A limit never reached: growth stops at max_steps and says so.
  auto flat = [](double rps) { return load_point{rps, 5.0, rps}; };
  o.max_steps = 5;
  const auto never = search_load_bracketed(flat, o);
  EXPECT_TRUE(never.limit_never_exceeded);
  EXPECT_FALSE(never.crossed);
  EXPECT_EQ(never.points.size(), 5u);
  EXPECT_DOUBLE_EQ(never.best.offered_rps, 16.0);

  // Saturation: tokens/s flat from 4 requests/s on (1000), p99 always within. Two loads without
  // a 5% rise (8 and 16) stop the growth long before max_steps.
  auto saturating = [](double rps) { return load_point{rps, 10.0, std::min(256.0 * rps, 1000.0)}; };
  o.max_steps = 12;
  o.saturation_loads = 2;
  const auto sat = search_load_bracketed(saturating, o);
  EXPECT_TRUE(sat.saturated);
  EXPECT_TRUE(sat.limit_never_exceeded);
  EXPECT_FALSE(sat.crossed);
  EXPECT_EQ(sat.points.size(), 5u); // 1, 2, 4, 8, 16
  EXPECT_DOUBLE_EQ(sat.best.offered_rps, 16.0);
  // Growing throughput never counts as saturation: the limit still ends the growth.
  const auto grows = search_load_bracketed(engine, o);
  EXPECT_FALSE(grows.saturated);
  EXPECT_TRUE(grows.crossed);
  o.saturation_loads = 0;

  // Beyond the limit from the first load (or a non-finite p99): nothing found, bisected below.
  auto hopeless = [](double rps) { return load_point{rps, rps > 0.3 ? std::nan("") : 40.0, rps}; };
  o.max_steps = 12;
  o.bisections = 3; // 1, 0.71, 0.5, 0.35: all beyond
  EXPECT_FALSE(search_load_bracketed(hopeless, o).found);
  o.bisections = 5; // ... 0.25 within, then sqrt(0.25 x 0.35) = 0.297 within
  const auto low = search_load_bracketed(hopeless, o);
  EXPECT_TRUE(low.crossed);
  ASSERT_TRUE(low.found);
  EXPECT_EQ(low.points.size(), 6u);
  EXPECT_NEAR(low.best.offered_rps, std::sqrt(0.25 * std::sqrt(0.125)), 1e-9);
}

TEST(load_search, throughput_at_the_limit_is_interpolated_between_the_bracket_loads) {
  // lo: 4 requests/s, p99 40 ms, 1000 tokens/s; hi: 16 requests/s, p99 60 ms, 3000 tokens/s.
  // The limit of 50 ms is halfway in p99: f = 0.5, the load sqrt(4 x 16) = 8, tokens/s 2000.
  const load_point lo{4.0, 40.0, 1000.0}, hi{16.0, 60.0, 3000.0};
  const auto c = interpolate_limit(lo, hi, 50.0);
  EXPECT_EQ(c.clamped, 0);
  EXPECT_DOUBLE_EQ(c.fraction, 0.5);
  EXPECT_NEAR(c.offered_rps, 8.0, 1e-12);
  EXPECT_DOUBLE_EQ(c.tokens_per_second, 2000.0);
  // 45 ms of 40..60: a quarter of the way, 4 x 4^0.25 = 5.657 requests/s, 1500 tokens/s.
  const auto q = interpolate_limit(lo, hi, 45.0);
  EXPECT_DOUBLE_EQ(q.fraction, 0.25);
  EXPECT_NEAR(q.offered_rps, 4.0 * std::sqrt(2.0), 1e-12);
  EXPECT_DOUBLE_EQ(q.tokens_per_second, 1500.0);
  // A small change of p99 moves the value a little, never a whole grid step.
  const auto near = interpolate_limit(lo, load_point{16.0, 61.0, 3000.0}, 50.0);
  EXPECT_NEAR(near.tokens_per_second, 1000.0 + 2000.0 * 10.0 / 21.0, 1e-9);
  // Another seed's trace with both loads within: clamped at hi; both beyond: at lo.
  const auto above = interpolate_limit(lo, load_point{16.0, 49.0, 3100.0}, 50.0);
  EXPECT_EQ(above.clamped, 1);
  EXPECT_DOUBLE_EQ(above.tokens_per_second, 3100.0);
  EXPECT_DOUBLE_EQ(above.offered_rps, 16.0);
  const auto below = interpolate_limit(load_point{4.0, 55.0, 900.0}, hi, 50.0);
  EXPECT_EQ(below.clamped, -1);
  EXPECT_DOUBLE_EQ(below.tokens_per_second, 900.0);
  EXPECT_DOUBLE_EQ(below.offered_rps, 4.0);
  // A non-finite p99 at hi (nothing measurable) or at lo: the crossing is taken at lo.
  const auto nan_hi = interpolate_limit(lo, load_point{16.0, std::nan(""), 0.0}, 50.0);
  EXPECT_EQ(nan_hi.clamped, -1);
  EXPECT_DOUBLE_EQ(nan_hi.tokens_per_second, 1000.0);
  EXPECT_EQ(interpolate_limit(load_point{4.0, std::nan(""), 5.0}, hi, 50.0).clamped, -1);
  // The loads must be a bracket.
  EXPECT_THROW(interpolate_limit(hi, lo, 50.0), std::invalid_argument);
  EXPECT_THROW(interpolate_limit(load_point{0.0, 1.0, 1.0}, hi, 50.0), std::invalid_argument);
}
