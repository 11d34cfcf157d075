#include <cmath>

#include <gtest/gtest.h>

#include "oracles/layernorm_oracle.h"

using namespace kg;

namespace {
layernorm_inputs hand_inputs() {
  const double x[] = {1, 2, 3, 4};
  const double w[] = {2, 1, 1, 0.5};
  const double b[] = {0, 1, -1, 0.25};
  return {host_tensor::from_doubles(dtype::float32, {1, 4}, x),
          host_tensor::from_doubles(dtype::float32, {4}, w),
          host_tensor::from_doubles(dtype::float32, {4}, b)};
}
} // namespace

// x = (1, 2, 3, 4): mean 2.5, population variance 1.25, z = (x - 2.5) / sqrt(1.25 + eps).
TEST(layernorm_oracle, matches_hand_computation_for_every_formula) {
  const auto in = hand_inputs();
  const double eps = 1e-5, s = 1.0 / std::sqrt(1.25 + eps);
  const double z[] = {-1.5 * s, -0.5 * s, 0.5 * s, 1.5 * s};
  const double w[] = {2, 1, 1, 0.5}, b[] = {0, 1, -1, 0.25};
  auto check = [&](affine_formula f, auto expected) {
    const auto y = layernorm_oracle_fp64(in, eps, f);
    ASSERT_EQ(y.type, dtype::float64);
    for (int i = 0; i < 4; ++i)
      EXPECT_NEAR(y.at(i), expected(i), 1e-14) << info(f).name << i;
  };
  check(affine_formula::reference, [&](int i) { return z[i] * w[i] + b[i]; });
  check(affine_formula::omit_all, [&](int i) { return z[i]; });
  check(affine_formula::omit_weight, [&](int i) { return z[i] + b[i]; });
  check(affine_formula::omit_bias, [&](int i) { return z[i] * w[i]; });
  check(affine_formula::scalar_affine, [&](int i) { return z[i] * w[0] + b[0]; });
  check(affine_formula::affine_twice, [&](int i) { return (z[i] * w[i] + b[i]) * w[i] + b[i]; });
  // x*w + b = (2, 3, 2, 2.25): mean 2.3125, variance 0.16796875.
  const double u[] = {2, 3, 2, 2.25};
  const double su = 1.0 / std::sqrt(0.16796875 + eps);
  check(affine_formula::affine_before_norm, [&](int i) { return (u[i] - 2.3125) * su; });
}

TEST(layernorm_oracle, rows_are_independent) {
  const double x[] = {1, 2, 3, 4, 10, 20, 30, 40};
  const double w[] = {1, 1, 1, 1}, b[] = {0, 0, 0, 0};
  layernorm_inputs in{host_tensor::from_doubles(dtype::float32, {2, 4}, x),
                      host_tensor::from_doubles(dtype::float32, {4}, w),
                      host_tensor::from_doubles(dtype::float32, {4}, b)};
  const auto y = layernorm_oracle_fp64(in, 0.0);
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(y.at(i), y.at(4 + i), 1e-14);
}
