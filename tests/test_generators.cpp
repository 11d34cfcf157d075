#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "workloads/generators.h"
#include "workloads/layernorm_affine.h"

using namespace kg;

namespace {
struct moments {
  double mean, sd;
};
moments moments_of(const host_tensor& t) {
  double s = 0, s2 = 0;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    s += t.at(i);
    s2 += t.at(i) * t.at(i);
  }
  const double n = static_cast<double>(t.numel()), m = s / n;
  return {m, std::sqrt(s2 / n - m * m)};
}
} // namespace

TEST(generators, identity_parameters_are_exact) {
  const auto w = make_norm_weight(dtype::float16, 64, param_regime::identity, 7);
  const auto b = make_norm_bias(dtype::float16, 64, param_regime::identity, 7);
  for (std::int64_t i = 0; i < 64; ++i) {
    EXPECT_EQ(w.at(i), 1.0);
    EXPECT_EQ(b.at(i), 0.0);
  }
}

TEST(generators, varied_parameters_have_the_declared_distribution) {
  // n = 20000: the sample mean's standard error is 0.1/sqrt(n) = 7e-4, the sd's about 5e-4.
  const auto w = make_norm_weight(dtype::float32, 20000, param_regime::varied, 42);
  const auto b = make_norm_bias(dtype::float32, 20000, param_regime::varied, 42);
  const auto mw = moments_of(w), mb = moments_of(b);
  EXPECT_NEAR(mw.mean, 1.0, 0.004);
  EXPECT_NEAR(mw.sd, 0.1, 0.003);
  EXPECT_NEAR(mb.mean, 0.0, 0.004);
  EXPECT_NEAR(mb.sd, 0.1, 0.003);
  // Every element distinct from the identity value, and (almost all) from each other.
  std::set<double> distinct;
  for (std::int64_t i = 0; i < 64; ++i) {
    EXPECT_NE(w.at(i), 1.0);
    distinct.insert(w.at(i));
  }
  EXPECT_EQ(distinct.size(), 64u);
}

TEST(generators, activations_by_kind) {
  const auto u = make_activation(dtype::float32, {100, 100}, activation_kind::uniform01, 1);
  double lo = 1, hi = 0;
  for (std::int64_t i = 0; i < u.numel(); ++i) {
    lo = std::min(lo, u.at(i));
    hi = std::max(hi, u.at(i));
  }
  EXPECT_GE(lo, 0.0);
  EXPECT_LT(hi, 1.0);
  EXPECT_NEAR(moments_of(u).mean, 0.5, 0.01);
  const auto n = make_activation(dtype::float32, {100, 100}, activation_kind::normal, 1);
  const auto mn = moments_of(n);
  EXPECT_NEAR(mn.mean, 0.0, 0.04);
  EXPECT_NEAR(mn.sd, 1.0, 0.03);
}

TEST(generators, scaled_multiplies_then_rounds) {
  const auto x = make_activation(dtype::float16, {8}, activation_kind::uniform01, 3);
  const auto neg = scaled(x, -1.0), small = scaled(x, 0.01);
  for (std::int64_t i = 0; i < 8; ++i) {
    EXPECT_EQ(neg.at(i), -x.at(i));
    EXPECT_EQ(small.at(i), round_to(dtype::float16, x.at(i) * 0.01));
  }
}

TEST(generators, seeds_are_deterministic_and_distinct) {
  const auto a = make_activation(dtype::float32, {4, 64}, activation_kind::normal, 42);
  const auto b = make_activation(dtype::float32, {4, 64}, activation_kind::normal, 42);
  const auto c = make_activation(dtype::float32, {4, 64}, activation_kind::normal, 43);
  const auto d = make_activation(dtype::float32, {4, 64}, activation_kind::normal, 42, "y");
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_NE(a.bytes, c.bytes);
  EXPECT_NE(a.bytes, d.bytes); // another role draws from another stream
}

TEST(generators, indices_stay_in_range_and_cover_it) {
  const auto idx = make_indices(dtype::int64, {1000}, 7, 5);
  std::set<double> seen;
  for (std::int64_t i = 0; i < idx.numel(); ++i) {
    EXPECT_GE(idx.at(i), 0);
    EXPECT_LT(idx.at(i), 7);
    EXPECT_EQ(idx.at(i), std::floor(idx.at(i)));
    seen.insert(idx.at(i));
  }
  EXPECT_EQ(seen.size(), 7u);
  EXPECT_THROW(make_indices(dtype::float32, {4}, 7, 5), std::invalid_argument);
}

TEST(layernorm_workload, grid_and_regimes) {
  const auto grid = layernorm_affine_grid();
  ASSERT_EQ(grid.size(), 18u);
  EXPECT_EQ(grid.front().rows, 1);
  EXPECT_EQ(grid.front().cols, 8);
  EXPECT_EQ(grid.back().cols, 127);
  EXPECT_EQ(grid.back().seed, 2026u);
  const auto drawn = draw_layernorm_inputs(grid[3]);
  const auto wo = select_regime(drawn, affine_regime::weight_only);
  const auto bo = select_regime(drawn, affine_regime::bias_only);
  const auto id = select_regime(drawn, affine_regime::identity);
  const auto both = select_regime(drawn, affine_regime::both);
  EXPECT_EQ(wo.weight.bytes, drawn.weight.bytes);
  EXPECT_EQ(bo.bias.bytes, drawn.bias.bytes);
  EXPECT_EQ(both.x.bytes, drawn.x.bytes);
  for (std::int64_t i = 0; i < drawn.weight.numel(); ++i) {
    EXPECT_EQ(wo.bias.at(i), 0.0);
    EXPECT_EQ(bo.weight.at(i), 1.0);
    EXPECT_EQ(id.weight.at(i), 1.0);
    EXPECT_EQ(id.bias.at(i), 0.0);
  }
}
