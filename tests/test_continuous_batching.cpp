// The decode engine's continuous-batching loop on hand-worked traces (no GPU: the step is a cost
// model), and the throughput-at-latency-limit search driven through it.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "batching_requests.h"
#include "workloads/continuous_batching.h"
#include "workloads/kv_allocator.h"
#include "workloads/load_search.h"

using namespace kg;
using kg::test::req;

namespace {
double constant_10ms(const step_plan&) {
  return 0.010;
}

std::int64_t prompt_tokens(const step_plan& p) {
  std::int64_t n = 0;
  for (const auto& part : p.prefills)
    n += part.tokens;
  return n;
}

// The chunked-prefill cost model: 1 ms a step plus 1 ms per decode row, and 10 us per prompt
// token prefilled in the step.
double chunk_cost(const step_plan& p) {
  return 1e-3 * (1.0 + static_cast<double>(p.decode_lengths.size())) +
         1e-5 * static_cast<double>(prompt_tokens(p));
}

// A step function that keeps every plan it is given.
step_fn recording(std::vector<step_plan>& plans, const step_fn& cost) {
  return [&plans, cost](const step_plan& p) {
    plans.push_back(p);
    return cost(p);
  };
}

void expect_part(const prefill_part& p, std::size_t seq, std::int64_t context, std::int64_t begin,
                 std::int64_t tokens) {
  EXPECT_EQ(p.sequence, seq);
  EXPECT_EQ(p.context, context);
  EXPECT_EQ(p.begin, begin);
  EXPECT_EQ(p.tokens, tokens);
}

void expect_times(const sequence_trace& s, const std::vector<double>& want) {
  ASSERT_EQ(s.token_seconds.size(), want.size());
  for (std::size_t k = 0; k < want.size(); ++k)
    EXPECT_NEAR(s.token_seconds[k], want[k], 1e-12) << "token " << k;
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

// Context 1000, chunk 256: four prefill steps of 256, 256, 256 and 232 tokens (3.56, 3.56, 3.56
// and 3.32 ms), the first token at the end of the fourth (14 ms), then one decode row a step
// (2 ms each: 16 and 18 ms).
TEST(continuous_batching, chunked_prefill_spreads_a_long_prompt_over_steps) {
  batching_options o;
  o.prefill_chunk_tokens = 256;
  std::vector<step_plan> plans;
  const auto r = run_continuous_batching({req(0, {1000}, 3)}, recording(plans, chunk_cost), o);
  ASSERT_EQ(plans.size(), 6u);
  const std::int64_t begins[] = {0, 256, 512, 768}, sizes[] = {256, 256, 256, 232};
  for (std::size_t k = 0; k < 4; ++k) {
    SCOPED_TRACE("step " + std::to_string(k + 1));
    ASSERT_EQ(plans[k].prefills.size(), 1u);
    expect_part(plans[k].prefills[0], 0, 1000, begins[k], sizes[k]);
    EXPECT_EQ(plans[k].prefills[0].last(), k == 3);
    EXPECT_TRUE(plans[k].decode_lengths.empty());
    EXPECT_TRUE(plans[k].prefill_contexts.empty()); // chunked mode: only prefills
  }
  EXPECT_TRUE(plans[4].prefills.empty());
  EXPECT_EQ(plans[4].decode_lengths, std::vector<std::int64_t>{1001});
  EXPECT_EQ(plans[4].decode_sequences, std::vector<std::size_t>{0});
  EXPECT_EQ(plans[5].decode_lengths, std::vector<std::int64_t>{1002});
  expect_times(r.sequences[0], {0.014, 0.016, 0.018});
  EXPECT_EQ(r.steps, 6);
  EXPECT_EQ(r.tokens, 3);
  EXPECT_EQ(r.prefill_tokens, 1000);
  EXPECT_EQ(r.prefill_steps, 4);
  EXPECT_EQ(r.batch_histogram[0], 4);
  EXPECT_EQ(r.batch_histogram[1], 2);
  EXPECT_NEAR(r.end_seconds, 0.018, 1e-12);
}

// Two prompts of 300 admitted together, chunk 256, 2 tokens each. Step 1: seq0 [0,256) (3.56
// ms). Step 2: seq0 [256,300) + seq1 [0,212) (3.56 ms; seq0's first token at 7.12). Step 3:
// seq0 decodes, seq1 [212,300) (2 + 0.88 ms: 10 ms; seq0 done, seq1's first token). Step 4: seq1
// decodes (2 ms: 12).
TEST(continuous_batching, chunked_prefill_shares_the_budget_oldest_first) {
  batching_options o;
  o.prefill_chunk_tokens = 256;
  std::vector<step_plan> plans;
  const auto r = run_continuous_batching({req(0, {300, 300}, 2)}, recording(plans, chunk_cost), o);
  ASSERT_EQ(plans.size(), 4u);
  ASSERT_EQ(plans[0].prefills.size(), 1u);
  expect_part(plans[0].prefills[0], 0, 300, 0, 256);
  ASSERT_EQ(plans[1].prefills.size(), 2u);
  expect_part(plans[1].prefills[0], 0, 300, 256, 44);
  EXPECT_TRUE(plans[1].prefills[0].last());
  expect_part(plans[1].prefills[1], 1, 300, 0, 212);
  EXPECT_FALSE(plans[1].prefills[1].last());
  EXPECT_TRUE(plans[1].decode_lengths.empty());
  ASSERT_EQ(plans[2].prefills.size(), 1u);
  expect_part(plans[2].prefills[0], 1, 300, 212, 88);
  EXPECT_EQ(plans[2].decode_lengths, std::vector<std::int64_t>{301});
  EXPECT_EQ(plans[2].decode_sequences, std::vector<std::size_t>{0});
  EXPECT_TRUE(plans[3].prefills.empty());
  EXPECT_EQ(plans[3].decode_sequences, std::vector<std::size_t>{1});
  expect_times(r.sequences[0], {0.00712, 0.010});
  expect_times(r.sequences[1], {0.010, 0.012});
  EXPECT_EQ(r.prefill_tokens, 600);
  EXPECT_EQ(r.prefill_steps, 3);
  EXPECT_EQ(r.steps, 4);
  EXPECT_EQ(r.tokens, 4);
}

// A (context 100, 4 tokens) runs alone; B (context 600, 2 tokens) arrives during A's prefill
// step and is admitted at 2 ms. Whole
// prompts: B's 600 tokens go into one step with A's decode row (2 + 6 = 8 ms: A's interval
// jumps to 8 ms). Chunk 256: A decodes beside B's parts of 256, 256 and 88 tokens, intervals of
// 4.56, 4.56 and 2.88 ms -- longer than a plain 2 ms decode step by the prompt tokens in each.
TEST(continuous_batching, decode_rows_keep_running_while_a_prompt_is_prefilled_in_chunks) {
  const std::vector<request> load = {req(0, {100}, 4), req(0.001, {600}, 2)};
  batching_options o;
  const auto whole = run_continuous_batching(load, chunk_cost, o);
  expect_times(whole.sequences[0], {0.002, 0.010, 0.013, 0.015});
  expect_times(whole.sequences[1], {0.010, 0.013});
  EXPECT_NEAR(whole.p99_itl_ms(), 8.0, 1e-9);

  o.prefill_chunk_tokens = 256;
  std::vector<step_plan> plans;
  const auto chunked = run_continuous_batching(load, recording(plans, chunk_cost), o);
  expect_times(chunked.sequences[0], {0.002, 0.00656, 0.01112, 0.014});
  expect_times(chunked.sequences[1], {0.014, 0.016});
  ASSERT_EQ(plans.size(), 5u);
  for (std::size_t k = 1; k < 4; ++k) { // B's three parts, each beside A's decode row
    EXPECT_EQ(plans[k].decode_sequences, std::vector<std::size_t>{0});
    EXPECT_EQ(plans[k].decode_lengths,
              std::vector<std::int64_t>{100 + static_cast<std::int64_t>(k)});
    ASSERT_EQ(plans[k].prefills.size(), 1u);
    EXPECT_EQ(plans[k].prefills[0].sequence, 1u);
  }
  EXPECT_NEAR(chunked.p99_itl_ms(), 4.56, 1e-9);
  EXPECT_EQ(chunked.prefill_tokens, 700);
  EXPECT_EQ(chunked.prefill_steps, 4);
  EXPECT_EQ(whole.prefill_tokens, 700);
  EXPECT_EQ(whole.prefill_steps, 2);
  EXPECT_EQ(chunked.tokens, 6);
  EXPECT_EQ(whole.tokens, 6);
}

// Chunk 0 is the whole-prompt loop: on the idle-gap trace above (two sequences of 2 tokens at
// 0, one at 20 ms) the plans are, by hand, prefill {100, 200}; decode {101, 201}; prefill {300};
// decode {301} -- with prefills holding the same prompts as whole parts.
TEST(continuous_batching, chunk_zero_gives_whole_prompt_plans_with_whole_parts) {
  std::vector<step_plan> plans;
  const auto r = run_continuous_batching({req(0, {100, 200}, 2), req(0.020, {300}, 2)},
                                         recording(plans, constant_10ms), batching_options{});
  ASSERT_EQ(plans.size(), 4u);
  EXPECT_EQ(plans[0].prefill_contexts, (std::vector<std::int64_t>{100, 200}));
  ASSERT_EQ(plans[0].prefills.size(), 2u);
  expect_part(plans[0].prefills[0], 0, 100, 0, 100);
  expect_part(plans[0].prefills[1], 1, 200, 0, 200);
  EXPECT_TRUE(plans[0].prefills[0].last() && plans[0].prefills[1].last());
  EXPECT_TRUE(plans[0].decode_lengths.empty() && plans[0].decode_sequences.empty());
  EXPECT_EQ(plans[1].decode_lengths, (std::vector<std::int64_t>{101, 201}));
  EXPECT_EQ(plans[1].decode_sequences, (std::vector<std::size_t>{0, 1}));
  EXPECT_TRUE(plans[1].prefill_contexts.empty() && plans[1].prefills.empty());
  EXPECT_EQ(plans[2].prefill_contexts, std::vector<std::int64_t>{300});
  ASSERT_EQ(plans[2].prefills.size(), 1u);
  expect_part(plans[2].prefills[0], 2, 300, 0, 300);
  EXPECT_EQ(plans[3].decode_lengths, std::vector<std::int64_t>{301});
  EXPECT_EQ(plans[3].decode_sequences, std::vector<std::size_t>{2});
  expect_times(r.sequences[0], {0.010, 0.020});
  expect_times(r.sequences[2], {0.030, 0.040}); // the clock jumped to 20 ms
  EXPECT_EQ(r.prefill_tokens, 600);
  EXPECT_EQ(r.prefill_steps, 2);

  // A chunk no step can exhaust schedules the same steps (only prefill_contexts stays empty).
  batching_options big;
  big.prefill_chunk_tokens = 1 << 20;
  std::vector<step_plan> big_plans;
  const auto b = run_continuous_batching({req(0, {100, 200}, 2), req(0.020, {300}, 2)},
                                         recording(big_plans, constant_10ms), big);
  ASSERT_EQ(big_plans.size(), plans.size());
  for (std::size_t k = 0; k < plans.size(); ++k) {
    EXPECT_TRUE(big_plans[k].prefill_contexts.empty());
    EXPECT_EQ(big_plans[k].decode_lengths, plans[k].decode_lengths);
    EXPECT_EQ(big_plans[k].decode_sequences, plans[k].decode_sequences);
    ASSERT_EQ(big_plans[k].prefills.size(), plans[k].prefills.size());
    for (std::size_t i = 0; i < plans[k].prefills.size(); ++i)
      EXPECT_EQ(big_plans[k].prefills[i].tokens, plans[k].prefills[i].tokens);
  }
  for (std::size_t s = 0; s < 3; ++s)
    EXPECT_EQ(b.sequences[s].token_seconds, r.sequences[s].token_seconds);
}

// An allocator that holds 250 tokens and records every call. Sequences 0, 1, 2 of contexts 100,
// 200, 10 and 2 tokens each need 102, 202 and 12. Step 1: 0 is reserved, 1 refused (304 > 250);
// 2 would fit but is never asked (no overtaking). Step 2: 1 refused again; 0 finishes (released).
// Step 3: 1 and 2 reserved and prefilled; step 4 they finish. The token counter of 1000 would
// have admitted all three at once: it is not consulted.
TEST(continuous_batching, kv_reserve_refusing_holds_the_fifo_head_and_everyone_behind_it) {
  std::vector<std::pair<std::size_t, std::int64_t>> reserves;
  std::vector<std::size_t> releases;
  std::map<std::size_t, std::int64_t> held;
  batching_options o;
  o.kv_capacity_tokens = 1000;
  o.kv_reserve = [&](std::size_t s, std::int64_t tokens) {
    EXPECT_EQ(held.count(s), 0u) << "sequence " << s << " reserved twice";
    reserves.emplace_back(s, tokens);
    std::int64_t used = 0;
    for (const auto& [seq, n] : held)
      used += n;
    if (used + tokens > 250) return false;
    held[s] = tokens;
    return true;
  };
  o.kv_release = [&](std::size_t s) {
    EXPECT_EQ(held.erase(s), 1u) << "sequence " << s << " released without a reservation";
    releases.push_back(s);
  };
  const auto r = run_continuous_batching({req(0, {100, 200, 10}, 2)}, constant_10ms, o);
  const std::vector<std::pair<std::size_t, std::int64_t>> want_reserves = {
      {0, 102}, {1, 202}, {1, 202}, {1, 202}, {2, 12}};
  EXPECT_EQ(reserves, want_reserves);
  EXPECT_EQ(r.kv_refusals, 2); // sequence 1, twice
  EXPECT_EQ(releases, (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_TRUE(held.empty());
  expect_times(r.sequences[0], {0.010, 0.020});
  expect_times(r.sequences[1], {0.030, 0.040});
  expect_times(r.sequences[2], {0.030, 0.040});

  // The fit-ever check still reads kv_capacity_tokens, whatever kv_reserve would say.
  o.kv_capacity_tokens = 100;
  o.kv_reserve = [](std::size_t, std::int64_t) { return true; };
  o.kv_release = nullptr;
  EXPECT_THROW(run_continuous_batching({req(0, {100}, 2)}, constant_10ms, o),
               std::invalid_argument);
  // An allocator that refuses with nothing running would wait forever: the loop says so.
  o.kv_capacity_tokens = 1000;
  o.kv_reserve = [](std::size_t, std::int64_t) { return false; };
  EXPECT_THROW(run_continuous_batching({req(0, {100}, 2)}, constant_10ms, o), std::logic_error);
}

// The block allocator plugged in (pool 256, granule 64). A, B, C of context 62 take 64, 128
// (B: 10 tokens, 72 rounded up) and 64 tokens at 0, 64 and 192; D (context 126, 2 tokens: 128)
// waits. A and C finish at step 2, leaving 128 tokens free in two holes of 64: D still waits,
// until B finishes at step 10; its first token comes out of step 11. A counter of 256 tokens
// admits D as soon as A and C free theirs (72 + 128 <= 256): step 3.
TEST(continuous_batching, a_fragmented_block_pool_refuses_what_a_counter_admits) {
  const std::vector<request> load = {req(0, {62}, 2), req(0, {62}, 10), req(0, {62}, 2),
                                     req(0, {126}, 2)};
  batching_options counter;
  counter.kv_capacity_tokens = 256;
  const auto c = run_continuous_batching(load, constant_10ms, counter);
  expect_times(c.sequences[3], {0.030, 0.040});

  kv_block_allocator pool(256, 64);
  std::map<std::size_t, std::int64_t> blocks;
  batching_options o = counter;
  o.kv_reserve = [&](std::size_t s, std::int64_t tokens) {
    const auto start = pool.allocate(tokens);
    if (start) blocks[s] = *start;
    return start.has_value();
  };
  o.kv_release = [&](std::size_t s) {
    pool.release(blocks.at(s));
    blocks.erase(s);
  };
  const auto r = run_continuous_batching(load, constant_10ms, o);
  expect_times(r.sequences[3], {0.110, 0.120});
  ASSERT_EQ(r.sequences[1].token_seconds.size(), 10u);
  EXPECT_NEAR(r.sequences[1].token_seconds.back(), 0.100, 1e-12);
  EXPECT_TRUE(blocks.empty());
  EXPECT_EQ(pool.free_tokens(), 256);
}

// max_batch 2 counts prefilling sequences too. Contexts 150 x 3, chunk 100, 2 tokens each, 10 ms
// steps. Step 1 admits 0 and 1 (2 waits, though nothing decodes): 0 [0,100). Step 2: 0 [100,150)
// + 1 [0,50). Step 3: 0 decodes (done), 1 [50,150). Step 4: 2 admitted: 1 decodes (done), 2
// [0,100). Step 5: 2 [100,150). Step 6: 2 decodes.
TEST(continuous_batching, max_batch_caps_prefilling_and_decoding_sequences_together) {
  batching_options o;
  o.max_batch = 2;
  o.prefill_chunk_tokens = 100;
  std::vector<step_plan> plans;
  const auto r =
      run_continuous_batching({req(0, {150, 150, 150}, 2)}, recording(plans, constant_10ms), o);
  ASSERT_EQ(plans.size(), 6u);
  ASSERT_EQ(plans[0].prefills.size(), 1u);
  expect_part(plans[0].prefills[0], 0, 150, 0, 100);
  ASSERT_EQ(plans[1].prefills.size(), 2u);
  expect_part(plans[1].prefills[0], 0, 150, 100, 50);
  expect_part(plans[1].prefills[1], 1, 150, 0, 50);
  ASSERT_EQ(plans[2].prefills.size(), 1u);
  expect_part(plans[2].prefills[0], 1, 150, 50, 100);
  EXPECT_EQ(plans[2].decode_sequences, std::vector<std::size_t>{0});
  ASSERT_EQ(plans[3].prefills.size(), 1u);
  expect_part(plans[3].prefills[0], 2, 150, 0, 100);
  EXPECT_EQ(plans[3].decode_sequences, std::vector<std::size_t>{1});
  ASSERT_EQ(plans[4].prefills.size(), 1u);
  expect_part(plans[4].prefills[0], 2, 150, 100, 50);
  EXPECT_TRUE(plans[4].decode_lengths.empty());
  EXPECT_EQ(plans[5].decode_sequences, std::vector<std::size_t>{2});
  expect_times(r.sequences[0], {0.020, 0.030});
  expect_times(r.sequences[1], {0.030, 0.040});
  expect_times(r.sequences[2], {0.050, 0.060});
  EXPECT_EQ(r.max_batch_seen, 1);
}

// A seeded trace through chunked prefill, every plan checked against a mirror kept here: the
// decode rows are the sequences past their prefill in admission (= index) order, each at context
// + tokens so far; the parts continue each prompt where it stopped and stay within the chunk.
TEST(continuous_batching, chunked_plans_agree_with_a_mirror_of_every_sequence) {
  arrival_options a;
  a.requests_per_second = 4;
  a.duration_seconds = 5;
  a.min_context = 64;
  a.max_context = 1500;
  a.output_tokens = 20;
  a.seed = 11;
  const auto load = generate_arrivals(a);
  std::vector<std::int64_t> contexts;
  for (const auto& q : load)
    contexts.insert(contexts.end(), q.contexts.begin(), q.contexts.end());
  batching_options o;
  o.prefill_chunk_tokens = 512;
  o.max_batch = 8;
  std::vector<std::int64_t> prefilled(contexts.size(), 0), out(contexts.size(), 0);
  std::size_t checked_steps = 0;
  const auto step = [&](const step_plan& p) {
    ++checked_steps;
    EXPECT_TRUE(p.prefill_contexts.empty());
    EXPECT_EQ(p.decode_sequences.size(), p.decode_lengths.size());
    EXPECT_FALSE(p.decode_lengths.empty() && p.prefills.empty());
    EXPECT_LE(prompt_tokens(p), 512);
    for (std::size_t i = 0; i < p.decode_sequences.size(); ++i) {
      const std::size_t s = p.decode_sequences[i];
      if (i > 0) {
        EXPECT_LT(p.decode_sequences[i - 1], s);
      }
      EXPECT_EQ(prefilled[s], contexts[s]);
      EXPECT_EQ(p.decode_lengths[i], contexts[s] + out[s]);
    }
    for (const auto& part : p.prefills) {
      EXPECT_EQ(part.context, contexts[part.sequence]);
      EXPECT_EQ(part.begin, prefilled[part.sequence]);
      EXPECT_GT(part.tokens, 0);
    }
    EXPECT_LE(p.decode_lengths.size() + p.prefills.size(), 8u);
    for (const auto s : p.decode_sequences)
      ++out[s];
    for (const auto& part : p.prefills) {
      prefilled[part.sequence] += part.tokens;
      if (part.last()) out[part.sequence] = 1;
    }
    return chunk_cost(p);
  };
  const auto r = run_continuous_batching(load, step, o);
  EXPECT_EQ(checked_steps, static_cast<std::size_t>(r.steps));
  EXPECT_FALSE(r.truncated);
  EXPECT_EQ(prefilled, contexts);
  for (std::size_t s = 0; s < contexts.size(); ++s) {
    EXPECT_EQ(out[s], 20);
    EXPECT_EQ(r.sequences[s].token_seconds.size(), 20u);
  }
  EXPECT_EQ(r.prefill_tokens, std::accumulate(contexts.begin(), contexts.end(), std::int64_t{0}));
  EXPECT_EQ(r.tokens, static_cast<std::int64_t>(20 * contexts.size()));
  EXPECT_GT(r.prefill_steps, 0);
  EXPECT_LE(r.prefill_steps, r.steps);
}

TEST(continuous_batching, a_negative_chunk_is_refused) {
  batching_options o;
  o.prefill_chunk_tokens = -1;
  EXPECT_THROW(run_continuous_batching({req(0, {10}, 2)}, constant_10ms, o), std::invalid_argument);
}
