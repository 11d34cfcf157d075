// The LayerNorm affine ablation workload (docs/architecture.md, The LayerNorm affine ablation):
// its configuration grid, the four affine regimes, and the tensors each observation uses.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "workloads/generators.h"
#include "workloads/tensor.h"

namespace kg {

inline constexpr double layernorm_eps = 1e-5;

enum class affine_regime { identity, weight_only, bias_only, both };
std::string_view affine_regime_name(affine_regime r);
inline constexpr affine_regime all_affine_regimes[] = {
    affine_regime::identity, affine_regime::weight_only, affine_regime::bias_only,
    affine_regime::both};

struct layernorm_config {
  std::int64_t rows = 0;
  std::int64_t cols = 0; // the normalized dimension
  dtype type = dtype::float32;
  std::uint64_t seed = 0;
};

struct layernorm_inputs {
  host_tensor x;      // [rows, cols]
  host_tensor weight; // [cols]
  host_tensor bias;   // [cols]
};

// Shapes 1x8, 4x64, 4x127; dtypes float32, float16; seeds 7, 42, 2026: 18 configurations, in that
// nesting order (shape outermost).
std::vector<layernorm_config> layernorm_affine_grid();

// x ~ N(0,1) (or as `kind` says), the varied weight and the varied bias, each drawn once per
// configuration from its own stream; the regimes below reuse these exact tensors.
layernorm_inputs draw_layernorm_inputs(const layernorm_config& c,
                                       activation_kind kind = activation_kind::normal);
// Replaces the parameters the regime keeps fixed by the identity (weight 1, bias 0).
layernorm_inputs select_regime(const layernorm_inputs& varied, affine_regime r);

} // namespace kg
