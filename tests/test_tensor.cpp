#include <cmath>

#include <gtest/gtest.h>

#include "workloads/tensor.h"

using namespace kg;

TEST(half, known_encodings) {
  // Values and their IEEE binary16 bit patterns, from the format's definition.
  EXPECT_EQ(float_to_half_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bff);              // largest finite
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7c00);              // halfway to 2^16: rounds to inf
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -14)), 0x0400); // smallest normal
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -24)), 0x0001); // smallest subnormal
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -25)), 0x0000); // tie -> even (zero)
  EXPECT_EQ(float_to_half_bits(std::ldexp(3.0f, -25)), 0x0002); // tie -> even (2)
  EXPECT_EQ(float_to_half_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00); // tie -> even
  EXPECT_EQ(float_to_half_bits(1.0f + std::ldexp(3.0f, -11)), 0x3c02); // tie -> even (up)
  EXPECT_EQ(float_to_half_bits(INFINITY), 0x7c00);
  EXPECT_TRUE(std::isnan(half_bits_to_float(float_to_half_bits(NAN))));
}

TEST(half, every_value_round_trips) {
  for (std::uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = half_bits_to_float(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half_bits(f), h) << "half 0x" << std::hex << h;
  }
}

TEST(bf16, rounding) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(float_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(1.0f + std::ldexp(3.0f, -8)), 0x3f82);
  EXPECT_EQ(bf16_bits_to_float(0x4049), 3.140625f);
}

TEST(host_tensor, set_rounds_to_dtype_and_cast_round_trips) {
  host_tensor t(dtype::float16, {2, 3});
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.bytes.size(), 12u);
  t.set(4, 0.1);
  EXPECT_EQ(t.at(4), static_cast<double>(half_bits_to_float(0x2e66))); // 0.1 in binary16
  const host_tensor d = t.cast(dtype::float64);
  EXPECT_EQ(d.at(4), t.at(4));
  EXPECT_EQ(shape_string(t.shape), "2x3");
  EXPECT_EQ(parse_dtype("float16"), dtype::float16);
  EXPECT_FALSE(parse_dtype("float8").has_value());
}

TEST(host_tensor, from_doubles_checks_count) {
  const double v[] = {1, 2, 3};
  EXPECT_THROW(host_tensor::from_doubles(dtype::float32, {2, 2}, v), std::invalid_argument);
  const auto t = host_tensor::from_doubles(dtype::int64, {3}, v);
  EXPECT_EQ(t.at(2), 3.0);
}
