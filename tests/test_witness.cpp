// Witnessing mutants (mutants/witness.h) over a task's witness plan (workloads/witness_plan.h):
// the plan's configurations counted by hand, and a host kernel that is wrong only on tail shapes
// witnessed exactly there, with the element that shows it.
#include <cmath>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "mutants/witness.h"
#include "workloads/input_regimes.h"
#include "workloads/task.h"
#include "workloads/witness_plan.h"

using namespace kg;

namespace {

task_def scaled_rows() {
  task_def t;
  t.id = "scaled_rows";
  t.inputs = {{"x", dtype::float32, "activation", "", {"R", "C"}},
              {"w", dtype::float32, "weight", "", {"C"}},
              {"b", dtype::float32, "bias", "", {"C"}}};
  t.outputs = {{"y", dtype::float32, "activation", "", {"R", "C"}}};
  t.shapes = {{"aligned", {{"R", 4}, {"C", 256}}}, {"tail", {{"R", 3}, {"C", 1000}}}};
  return t; // all seven regimes (a task_def made in code)
}

// |x| over N elements in blocks of 32; `skip_tail`: the last partial block is never written (the
// boundary family's tail skip), so only N % 32 != 0 shows it.
std::vector<float> block_abs(const std::vector<float>& x, bool skip_tail) {
  std::vector<float> y(x.size(), 0.0f);
  const std::size_t n = x.size(), full = n - n % 32;
  for (std::size_t i = 0; i < (skip_tail ? full : n); ++i)
    y[i] = std::fabs(x[i]);
  return y;
}

// The check of the tests: x[i] = +-(i % 7 + 1) (alternating sign), against fp64 |x| with no
// tolerance; the worst element is the first of the largest error.
config_check check_of(bool skip_tail) {
  return [skip_tail](const input_config& c) -> std::optional<disagreement> {
    const auto n = static_cast<std::size_t>(c.dims.at("N"));
    std::vector<float> x(n);
    for (std::size_t i = 0; i < n; ++i)
      x[i] = static_cast<float>((i % 2 ? -1.0 : 1.0) * static_cast<double>(i % 7 + 1));
    const auto y = block_abs(x, skip_tail);
    std::optional<disagreement> worst;
    for (std::size_t i = 0; i < n; ++i) {
      const double want = std::fabs(static_cast<double>(x[i]));
      const double err = std::fabs(static_cast<double>(y[i]) - want);
      if (err > 0 && (!worst || err > worst->abs_error))
        worst = disagreement{"y", static_cast<std::int64_t>(i), y[i], want, err, ""};
    }
    return worst;
  };
}

} // namespace

TEST(witness_plan, varies_regimes_parameters_and_tails_one_at_a_time) {
  const auto plan = witness_plan(scaled_rows());
  // 2 shapes x 7 regimes = 14; parameters identity, normal, weight_normal, bias_normal on each
  // shape = 8; the row dimension C at 256 - 1, 256 - 31, 1000 - 1, 1000 - 31 (none a multiple of
  // 32), each in normal and tail_extreme = 8; a long row: the tail shape's C 1000 x 16 = 16000,
  // its R 3 / 16 -> 1. 31 in all.
  ASSERT_EQ(plan.size(), 31u);
  EXPECT_EQ(plan[0].name, "aligned/normal/task/s1");
  EXPECT_EQ(plan[13].name, "tail/special/task/s1");
  EXPECT_EQ(plan[14].name, "aligned/normal/identity/s1");
  EXPECT_EQ(plan[16].name, "aligned/normal/weight_normal/s1");
  EXPECT_EQ(plan[17].name, "aligned/normal/bias_normal/s1");
  EXPECT_EQ(plan[19].name, "tail/normal/normal/s1");
  EXPECT_EQ(plan[22].name, "aligned~tail255/normal/task/s1");
  EXPECT_EQ(plan[23].name, "aligned~tail255/tail_extreme/task/s1");
  EXPECT_EQ(plan[23].regime, 5); // tail_extreme's index among the seven
  EXPECT_EQ(plan[24].dims.at("C"), 225);
  EXPECT_EQ(plan[24].dims.at("R"), 4);
  EXPECT_EQ(plan[29].name, "tail~tail969/tail_extreme/task/s1");
  EXPECT_EQ(plan[30].name, "tail~long16000/normal/task/s1");
  EXPECT_EQ(plan[30].dims.at("C"), 16000);
  EXPECT_EQ(plan[30].dims.at("R"), 1);
  // Two seeds double the task's own (shape, regime) configurations only: 28 + 8 + 8 + 1.
  EXPECT_EQ(witness_plan(scaled_rows(), {2}).size(), 45u);
  // Seeds start where asked (the audit starts them at its protocols' seed): the task's own
  // configurations take first_seed, first_seed + 1, ..., every other one first_seed.
  const auto from7 = witness_plan(scaled_rows(), {2, 7});
  ASSERT_EQ(from7.size(), 45u);
  EXPECT_EQ(from7[0].name, "aligned/normal/task/s7");
  EXPECT_EQ(from7[1].name, "aligned/normal/task/s8");
  EXPECT_EQ(from7[1].seed, 8u);
  for (std::size_t i = 28; i < from7.size(); ++i)
    EXPECT_EQ(from7[i].seed, 7u) << from7[i].name;
  // Names are unique: they key the kill matrix's rows of configurations.
  std::set<std::string> names;
  for (const auto& c : plan)
    EXPECT_TRUE(names.insert(c.name).second) << c.name;
}

TEST(witness, a_mutant_wrong_only_on_tails_is_witnessed_exactly_there) {
  task_def t;
  t.id = "abs";
  t.inputs = {{"x", dtype::float32, "activation", "", {"N"}}};
  t.outputs = {{"y", dtype::float32, "activation", "", {"N"}}};
  t.shapes = {{"aligned", {{"N", 4096}}}, {"tail", {{"N", 1000}}}};
  t.regimes = {parse_regime("normal"), parse_regime("tail_extreme")};
  const auto plan = witness_plan(t);
  // aligned and tail x 2 regimes, then tails 4095, 4065 and 999, 969 x 2 regimes: 12.
  ASSERT_EQ(plan.size(), 12u);
  const auto mutant = witness_mutant(plan, check_of(true));
  EXPECT_EQ(mutant.status, witness_status::witnessed);
  // Killed on every configuration whose N is not a multiple of 32: all but the first two.
  for (std::size_t c = 0; c < plan.size(); ++c)
    EXPECT_EQ(mutant.kills[c], plan[c].dims.at("N") % 32 != 0) << plan[c].name;
  ASSERT_TRUE(mutant.first);
  EXPECT_EQ(plan[*mutant.first].name, "tail/normal/task/s1");
  // N = 1000: the skipped block is [992, 1000); its largest |x| is 7 at the first i with
  // i % 7 == 6, i = 993.
  EXPECT_EQ(mutant.evidence->index, 993);
  EXPECT_EQ(mutant.evidence->want, 7.0);
  EXPECT_EQ(mutant.evidence->got, 0.0);
  const auto j = mutant.to_json(plan);
  EXPECT_EQ(j["kills"], "001111111111");
  EXPECT_EQ(j["witness"]["dims"]["N"], 1000);
  // The correct kernel: no configuration disagrees; unwitnessed, no kills, no evidence.
  const auto right = witness_mutant(plan, check_of(false));
  EXPECT_EQ(right.status, witness_status::unwitnessed);
  EXPECT_FALSE(right.first);
  EXPECT_EQ(right.to_json(plan)["kills"], "000000000000");
}

TEST(witness_plan, one_parameter_role_at_a_time_leaves_the_other_at_identity) {
  const auto t = scaled_rows();
  task_input_regime w, b;
  w.normal_weights_only = true;
  b.normal_biases_only = true;
  const auto iw = make_task_inputs(t, t.shapes[0], 7, w);
  const auto ib = make_task_inputs(t, t.shapes[0], 7, b);
  int weight_ones = 0, bias_zeros = 0;
  for (std::int64_t k = 0; k < iw[1].numel(); ++k) {
    weight_ones += iw[1].at(k) == 1.0;
    EXPECT_EQ(iw[2].at(k), 0.0); // bias at identity
    EXPECT_EQ(ib[1].at(k), 1.0); // weight at identity
    bias_zeros += ib[2].at(k) == 0.0;
  }
  EXPECT_EQ(weight_ones, 0); // N(0, 1) draws: none exactly 1
  EXPECT_EQ(bias_zeros, 0);
}
