// The serving driver's warm start on the GPU (tiny model): the step cost model's calibration
// (which batch sizes it measures, and where the KV pool stops it) and a warm-started trace whose
// window opens on a full batch, the sequences the warm-up left running given their KV before
// their first real step.
#include <cstdint>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/cuda_raii.h"
#include "gpu_test_support.h"
#include "kernels/decode/decode_driver.h"
#include "workloads/arrivals.h"
#include "workloads/decode_engine_plan.h"

using namespace kg;

namespace {
decode_engine_config tiny_serving_config() {
  auto c = tiny_decode_engine_config(); // 8 slots, 1024 tokens a sequence
  c.max_prefill_tokens = 64;
  c.kv_pool_tokens = 3000;
  return c;
}

std::vector<int> batches_of(const step_cost_model& m) {
  std::vector<int> b;
  for (const auto& [batch, seconds] : m.decode_seconds) {
    b.push_back(batch);
    EXPECT_GT(seconds, 0.0) << "batch " << batch;
  }
  return b;
}
} // namespace

// Contexts of 200 tokens (201 with the step's token, 256 in the allocator's 64-token granules):
// 11 fit the 3000-token pool, 8 slots: batch 1, then 16 capped at the 8 slots. Of 500 (512): 5
// fit: batch 1, then the 5 the pool holds.
TEST(gpu_serving_warm_start, calibration_measures_the_batches_the_slots_and_pool_allow) {
  KG_REQUIRE_GPU();
  cuda_stream s;
  decode_engine e(tiny_serving_config(), s.get());
  const auto m = calibrate_step_cost(e, 200, 64);
  EXPECT_EQ(batches_of(m), (std::vector<int>{1, 8}));
  EXPECT_GT(m.prefill_seconds_per_token, 0.0);
  EXPECT_EQ(batches_of(calibrate_step_cost(e, 500, 64)), (std::vector<int>{1, 5}));
}

// 2000 sequences/s of 100-300 prompt tokens and 50 outputs on 8 slots is far past what the tiny
// model serves: after the warm-up every slot is busy and arrivals queue, where a cold trace
// opens on an idle server. The window's steps ran on the GPU (the warm-up's sequences got their
// KV first: a fill beyond a block would throw), and every sequence's tokens are in time order.
TEST(gpu_serving_warm_start, a_warm_window_opens_on_the_steady_batch) {
  KG_REQUIRE_GPU();
  cuda_stream s;
  auto c = tiny_serving_config();
  c.kv_pool_tokens = 4000; // 8 blocks of the longest life (350 tokens, 384 in 64-token granules)
  decode_engine e(c, s.get());
  const auto model = calibrate_step_cost(e, 200, 64);
  arrival_options a;
  a.requests_per_second = 2000;
  a.request_sizes = {1};
  a.size_weights = {1};
  a.min_context = 100;
  a.max_context = 300;
  a.output_tokens = 50;
  a.duration_seconds = 0.05;
  a.seed = 3;
  batching_options b;
  b.max_batch = 8;
  b.prefill_chunk_tokens = 64;
  b.max_seconds = a.duration_seconds;
  const auto cold = run_decode_batching(e, generate_arrivals(a), b);
  EXPECT_EQ(cold.running_at_window_start, 0);
  EXPECT_EQ(cold.simulated_steps, 0);

  const double warm_up = warm_up_seconds(model, b.max_batch, b.prefill_chunk_tokens, 50);
  b.measure_from_seconds = warm_up;
  b.max_seconds = warm_up + a.duration_seconds;
  EXPECT_THROW(run_decode_batching(e, generate_warm_arrivals(a, warm_up), b),
               std::invalid_argument); // a warm start needs the model
  decode_batching_stats stats;
  const auto warm = run_decode_batching(e, generate_warm_arrivals(a, warm_up), b, &stats, &model);
  EXPECT_GT(warm.simulated_steps, 0);
  EXPECT_EQ(warm.running_at_window_start, 8);
  EXPECT_GT(warm.waiting_at_window_start, 0);
  EXPECT_GT(warm.steps, 0);
  EXPECT_GT(warm.tokens, 0);
  EXPECT_GT(stats.decode_gpu_seconds, 0.0);
  EXPECT_GE(warm.window_start_seconds, warm_up);
  EXPECT_TRUE(warm.has_inter_token_interval());
  for (const auto& q : warm.sequences)
    for (std::size_t k = 1; k < q.token_seconds.size(); ++k)
      EXPECT_LT(q.token_seconds[k - 1], q.token_seconds[k]);
}
