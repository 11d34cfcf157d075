// The altered LayerNorm affine formulas (parameter-use faults) and the correct one. Each altered
// formula is a mutant of the correct kernel: the kill matrix records which inputs expose it.
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace kg {

enum class affine_formula {
  reference,          // y = layer_norm(x) * w + b
  omit_all,           // y = layer_norm(x)
  omit_weight,        // y = layer_norm(x) + b
  omit_bias,          // y = layer_norm(x) * w
  scalar_affine,      // y = layer_norm(x) * w[0] + b[0]
  affine_twice,       // y = (layer_norm(x) * w + b) * w + b
  affine_before_norm, // y = layer_norm(x * w + b)
};

struct formula_info {
  affine_formula formula;
  std::string_view name;   // machine name, used in records
  std::string_view label;  // row label of the outcome matrix (docs/architecture.md)
  std::string_view family; // mutation family (parameter-use faults: docs/architecture.md)
  std::string_view math;
};

const formula_info& info(affine_formula f);
std::span<const formula_info> altered_formulas(); // the six, in docs/architecture.md's order
std::optional<affine_formula> parse_affine_formula(std::string_view name);

} // namespace kg
