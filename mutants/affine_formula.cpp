#include "mutants/affine_formula.h"

namespace kg {

namespace {
constexpr formula_info formulas[] = {
    {affine_formula::reference, "reference", "correct", "none", "layer_norm(x) * w + b"},
    {affine_formula::omit_all, "omit_all", "omit all affine", "parameter-use", "layer_norm(x)"},
    {affine_formula::omit_weight, "omit_weight", "omit weight", "parameter-use",
     "layer_norm(x) + b"},
    {affine_formula::omit_bias, "omit_bias", "omit bias", "parameter-use", "layer_norm(x) * w"},
    {affine_formula::scalar_affine, "scalar_affine", "scalar affine", "parameter-use",
     "layer_norm(x) * w[0] + b[0]"},
    {affine_formula::affine_twice, "affine_twice", "apply affine twice", "parameter-use",
     "(layer_norm(x) * w + b) * w + b"},
    {affine_formula::affine_before_norm, "affine_before_norm", "affine before normalization",
     "parameter-use", "layer_norm(x * w + b)"},
};
} // namespace

const formula_info& info(affine_formula f) {
  return formulas[static_cast<int>(f)];
}

std::span<const formula_info> altered_formulas() {
  return std::span(formulas).subspan(1);
}

std::optional<affine_formula> parse_affine_formula(std::string_view name) {
  for (const auto& f : formulas)
    if (f.name == name) return f.formula;
  return std::nullopt;
}

} // namespace kg
