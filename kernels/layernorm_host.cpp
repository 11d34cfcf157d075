// Written independently of every backend: Welford's single-pass mean/variance in float, then
// fma(z, w, b) in float, then one rounding to the output dtype.
#include <cmath>

#include "base/name_table.h"
#include "kernels/layernorm_backend.h"

namespace kg {

host_tensor layernorm_host_independent(const layernorm_inputs& in, double eps) {
  const std::int64_t rows = in.x.shape.at(0), cols = in.x.shape.at(1);
  host_tensor y(in.x.type, in.x.shape);
  for (std::int64_t r = 0; r < rows; ++r) {
    float mean = 0.f, m2 = 0.f;
    for (std::int64_t c = 0; c < cols; ++c) {
      const float v = static_cast<float>(in.x.at(r * cols + c));
      const float delta = v - mean;
      mean += delta / static_cast<float>(c + 1);
      m2 += delta * (v - mean);
    }
    const float rstd = 1.f / std::sqrt(m2 / static_cast<float>(cols) + static_cast<float>(eps));
    for (std::int64_t c = 0; c < cols; ++c) {
      const float z = (static_cast<float>(in.x.at(r * cols + c)) - mean) * rstd;
      y.set(r * cols + c,
            std::fma(z, static_cast<float>(in.weight.at(c)), static_cast<float>(in.bias.at(c))));
    }
  }
  return y;
}

namespace {

constexpr name_table<half_norm_path, 4> half_norm_path_names{{
    {half_norm_path::automatic, "automatic"},
    {half_norm_path::native, "native"},
    {half_norm_path::float32_then_cast, "float32_then_cast"},
    {half_norm_path::float64_then_cast, "float64_then_cast"},
}};

} // namespace

std::string_view half_norm_path_name(half_norm_path p) {
  return name_of(half_norm_path_names, p);
}

} // namespace kg
