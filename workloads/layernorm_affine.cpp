#include "workloads/layernorm_affine.h"
#include "base/name_table.h"

namespace kg {

namespace {

constexpr name_table<affine_regime, 4> affine_regime_names{{
    {affine_regime::identity, "identity"},
    {affine_regime::weight_only, "weight_only"},
    {affine_regime::bias_only, "bias_only"},
    {affine_regime::both, "both"},
}};

} // namespace

std::string_view affine_regime_name(affine_regime r) {
  return name_of(affine_regime_names, r);
}

std::vector<layernorm_config> layernorm_affine_grid() {
  std::vector<layernorm_config> grid;
  const std::int64_t shapes[][2] = {{1, 8}, {4, 64}, {4, 127}};
  for (const auto& s : shapes)
    for (dtype t : {dtype::float32, dtype::float16})
      for (std::uint64_t seed : {7ull, 42ull, 2026ull})
        grid.push_back({s[0], s[1], t, seed});
  return grid;
}

layernorm_inputs draw_layernorm_inputs(const layernorm_config& c, activation_kind kind) {
  return {make_activation(c.type, {c.rows, c.cols}, kind, c.seed, "x"),
          make_norm_weight(c.type, c.cols, param_regime::varied, c.seed, "weight"),
          make_norm_bias(c.type, c.cols, param_regime::varied, c.seed, "bias")};
}

layernorm_inputs select_regime(const layernorm_inputs& varied, affine_regime r) {
  layernorm_inputs out = varied;
  const std::int64_t n = varied.weight.numel();
  const bool keep_weight = r == affine_regime::weight_only || r == affine_regime::both;
  const bool keep_bias = r == affine_regime::bias_only || r == affine_regime::both;
  if (!keep_weight) out.weight = make_norm_weight(varied.weight.type, n, param_regime::identity, 0);
  if (!keep_bias) out.bias = make_norm_bias(varied.bias.type, n, param_regime::identity, 0);
  return out;
}

} // namespace kg
