#include <algorithm>

#include <gtest/gtest.h>

#include "oracles/protocol.h"

using namespace kg;

namespace {
std::vector<input_decl> ln_shapes(int variant) {
  const std::int64_t rows = variant ? 7 : 4, cols = variant ? 161 : 64;
  return {{"x", input_role::activation, dtype::float32, {rows, cols}},
          {"weight", input_role::norm_weight, dtype::float32, {cols}},
          {"bias", input_role::norm_bias, dtype::float32, {cols}}};
}
bool all_equal(const host_tensor& t, double v) {
  for (std::int64_t i = 0; i < t.numel(); ++i)
    if (t.at(i) != v) return false;
  return true;
}
double min_of(const host_tensor& t) {
  double m = t.at(0);
  for (std::int64_t i = 0; i < t.numel(); ++i)
    m = std::min(m, t.at(i));
  return m;
}
} // namespace

TEST(protocol, presets_exist_and_unknown_is_rejected) {
  for (auto n : {"kernelbench", "kernelbench-v0", "kbv", "sol", "flashinfer", "strict"})
    EXPECT_TRUE(find_protocol(n).has_value()) << n;
  EXPECT_FALSE(find_protocol("nvbench").has_value());
}

TEST(protocol, kernelbench_draws_nonnegative_inputs_and_identity_parameters) {
  const auto p = *find_protocol("kernelbench");
  const auto trials = generate_trials(p, ln_shapes, 42);
  ASSERT_EQ(trials.size(), 5u);
  for (const auto& t : trials) {
    EXPECT_GE(min_of(t.inputs[0]), 0.0);
    EXPECT_TRUE(all_equal(t.inputs[1], 1.0));
    EXPECT_TRUE(all_equal(t.inputs[2], 0.0));
  }
  EXPECT_NE(trials[0].inputs[0].bytes, trials[1].inputs[0].bytes); // fresh draws
  EXPECT_EQ(p.comparator_fp32.kind, comparator_kind::allclose);
  EXPECT_EQ(p.comparator_fp32.side, tolerance_side::candidate);
  EXPECT_DOUBLE_EQ(p.comparator_fp32.atol, 1e-4);
  EXPECT_DOUBLE_EQ(p.comparator_low.atol, 1e-2);
  EXPECT_DOUBLE_EQ(find_protocol("kernelbench-v0")->comparator_fp32.atol, 1e-2);
}

TEST(protocol, only_kernelbench_models_a_time_rule_and_its_call_allowance_is_180_s_over_108) {
  // KernelBench's eval_from_generations.py: 180 s for the compile, 5 correctness trials, 3
  // warm-up and 100 timed calls.
  const auto kb = *find_protocol("kernelbench");
  EXPECT_DOUBLE_EQ(kb.call_allowance_seconds(), 180.0 / 108);
  EXPECT_EQ(kb.to_json().at("budget"), (nlohmann::json{{"seconds", 180.0}, {"calls", 108}}));
  for (auto n : {"kernelbench-v0", "kbv", "sol", "flashinfer", "strict"})
    EXPECT_EQ(find_protocol(n)->call_allowance_seconds(), 0.0) << n;
}

TEST(protocol, kbv_scales_one_draw_by_1_3_001_and_minus_1) {
  const auto trials = generate_trials(*find_protocol("kbv"), ln_shapes, 42);
  ASSERT_EQ(trials.size(), 4u);
  const auto& base = trials[0].inputs[0];
  for (std::int64_t i = 0; i < base.numel(); ++i) {
    EXPECT_EQ(trials[1].inputs[0].at(i), round_to(dtype::float32, base.at(i) * 3.0));
    EXPECT_EQ(trials[3].inputs[0].at(i), -base.at(i));
  }
  EXPECT_TRUE(all_equal(trials[3].inputs[1], 1.0)); // parameters not re-drawn
}

TEST(protocol, sol_uses_ones_and_zeros_for_norm_parameters) {
  const auto p = *find_protocol("sol");
  const auto trials = generate_trials(p, ln_shapes, 7);
  ASSERT_EQ(trials.size(), 10u);
  EXPECT_LT(min_of(trials[0].inputs[0]), 0.0); // signed activations
  EXPECT_TRUE(all_equal(trials[0].inputs[1], 1.0));
  EXPECT_TRUE(all_equal(trials[0].inputs[2], 0.0));
  EXPECT_EQ(p.comparator_fp32.kind, comparator_kind::matched_ratio);
  EXPECT_DOUBLE_EQ(p.comparator_fp32.required_ratio, 0.99);
}

TEST(protocol, strict_varies_parameters_and_adds_a_tail_shape) {
  const auto trials = generate_trials(*find_protocol("strict"), ln_shapes, 7);
  ASSERT_EQ(trials.size(), 12u); // 2 shapes x 2 draws x 3 scales
  bool saw_tail = false;
  for (const auto& t : trials) {
    EXPECT_FALSE(all_equal(t.inputs[1], 1.0));
    EXPECT_FALSE(all_equal(t.inputs[2], 0.0));
    if (t.inputs[0].shape[1] == 161) saw_tail = true;
  }
  EXPECT_TRUE(saw_tail);
}
