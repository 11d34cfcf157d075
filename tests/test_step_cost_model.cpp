// The warm start's step cost model on hand-worked values.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "workloads/step_cost_model.h"

using namespace kg;

namespace {
step_cost_model three_points() {
  step_cost_model m;
  m.decode_seconds = {{1, 0.002}, {16, 0.005}, {64, 0.011}};
  m.prefill_seconds_per_token = 1e-5;
  return m;
}
} // namespace

// Between points: batch 8 is 7/15 of the way from 1 to 16: 2 + 3 x 7/15 = 3.4 ms. Beyond the
// last: the 16..64 slope (6 ms over 48 rows) extended to 128: 11 + 64 x 0.125 = 19 ms.
TEST(step_cost_model, decode_is_piecewise_linear_and_extends_its_last_segment) {
  const auto m = three_points();
  EXPECT_EQ(m.decode(0), 0.0);
  EXPECT_NEAR(m.decode(1), 0.002, 1e-15);
  EXPECT_NEAR(m.decode(8), 0.0034, 1e-15);
  EXPECT_NEAR(m.decode(16), 0.005, 1e-15);
  EXPECT_NEAR(m.decode(40), 0.008, 1e-15);
  EXPECT_NEAR(m.decode(128), 0.019, 1e-15);
}

// A plan of 16 decode rows and parts of 300 + 200 prompt tokens: 5 ms + 500 x 10 us = 10 ms.
// The longest step at 64 rows and a 2048-token chunk: 11 ms + 20.48 ms.
TEST(step_cost_model, a_plan_costs_its_decode_rows_and_its_prompt_tokens) {
  const auto m = three_points();
  step_plan p;
  p.decode_lengths.assign(16, 100);
  p.prefills = {{0, 300, 0, 300}, {1, 900, 0, 200}};
  EXPECT_NEAR(m.seconds(p), 0.010, 1e-15);
  EXPECT_NEAR(m.longest_step(64, 2048), 0.011 + 0.02048, 1e-15);
  EXPECT_NEAR(warm_up_seconds(m, 64, 2048, 256), 256 * (0.011 + 0.02048), 1e-12);
}

// Rounded to powers of 2^(1/16): 2 ms is 2^-8.9658; x 16 = -143.45, rounded -143: 2^(-143/16).
// Values a step of 2^(1/32) apart at most land on one grid point or its neighbour.
TEST(step_cost_model, quantized_values_sit_on_the_sixteenth_octave_grid) {
  const auto q = three_points().quantized();
  EXPECT_NEAR(q.decode_seconds[0].second, std::exp2(-143.0 / 16.0), 1e-15);
  for (const auto& [b, t] : q.decode_seconds) {
    const double k = 16.0 * std::log2(t);
    EXPECT_NEAR(k, std::round(k), 1e-9) << "batch " << b;
  }
  const double k = 16.0 * std::log2(q.prefill_seconds_per_token);
  EXPECT_NEAR(k, std::round(k), 1e-9);
  step_cost_model near = three_points();
  near.decode_seconds[0].second *= 1.01;
  EXPECT_LE(
      std::abs(std::log2(near.quantized().decode_seconds[0].second / q.decode_seconds[0].second) *
               16.0),
      1.0 + 1e-9);
}
