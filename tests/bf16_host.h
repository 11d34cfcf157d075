// bf16 <-> float on the host for the decode tests' references: round to nearest even, as
// __float2bfloat16 does (NaN aside: the references never make one).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace kg::test {

inline float bf16_to_float(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline std::uint16_t float_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

// The value a float takes once stored as bf16.
inline float round_bf16(double x) {
  return bf16_to_float(float_to_bf16(static_cast<float>(x)));
}

inline std::vector<float> to_float(const std::vector<std::uint16_t>& b) {
  std::vector<float> f(b.size());
  for (std::size_t i = 0; i < b.size(); ++i)
    f[i] = bf16_to_float(b[i]);
  return f;
}

} // namespace kg::test
