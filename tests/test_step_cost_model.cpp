// The warm start's step cost model on hand-worked values.
#include <stdexcept>
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

// What records carry comes back as the same model; what cannot be a model is refused.
TEST(step_cost_model, a_model_round_trips_through_json_and_bad_ones_are_refused) {
  const auto m = three_points();
  const auto back = step_cost_model_from_json(step_cost_model_json(m));
  EXPECT_EQ(back.decode_seconds, m.decode_seconds);
  EXPECT_EQ(back.prefill_seconds_per_token, m.prefill_seconds_per_token);
  const auto bad = [](const char* text) {
    EXPECT_THROW(step_cost_model_from_json(nlohmann::json::parse(text)), std::invalid_argument)
        << text;
  };
  bad(R"({"prefill_seconds_per_token": 1e-5})");
  bad(R"({"decode_seconds": [], "prefill_seconds_per_token": 1e-5})");
  bad(R"({"decode_seconds": [{"batch": 0, "seconds": 0.002}], "prefill_seconds_per_token": 1e-5})");
  bad(R"({"decode_seconds": [{"batch": 4, "seconds": 0.002}, {"batch": 2, "seconds": 0.003}],
          "prefill_seconds_per_token": 1e-5})");
  bad(R"({"decode_seconds": [{"batch": 1, "seconds": -1}], "prefill_seconds_per_token": 1e-5})");
  bad(R"({"decode_seconds": [{"batch": 1, "seconds": 0.002}], "prefill_seconds_per_token": 0})");
  bad(R"([1, 2])");
}
