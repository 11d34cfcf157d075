// Input regimes of kernelgate's strict protocol: how the floating-point activations of one trial
// are drawn. N(0,1) alone cannot expose a kernel that is right only while every row is well
// scaled: eps outside the square root is right while row variances are near 1, a softmax without
// its max subtraction overflows only on large inputs, an argmax that takes the last index on
// ties is right while no row has a tie. Each regime targets one such fault class; a task
// declares which regimes are valid for its op (data/tasks/<id>.json "regimes") and, where a
// regime needs one, its own tolerance. Rows are the last dimension of a tensor.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/rng.h"
#include "workloads/tensor.h"

namespace kg {

enum class regime_kind {
  normal,       // N(0, 1)
  scaled,       // N(0, 1) x 10^k per row, k cycling over [min_exp, max_exp] in a random order
  shifted,      // per row: s + N(0, 1), |s| = 10^U(log10 min_shift, log10 max_shift), random sign
  low_variance, // per row: m + relative_sd |m| N(0, 1), |m| = 10^U(0, 1), random sign
  ties,         // N(0, 1), then each row's maximum and minimum copied to a second position
  tail_extreme, // N(0, 1), then each row's maximum (and minimum) moved into the last partial block
  special,      // N(0, 1) with about 1 element in 8 replaced by +0, -0 or a +-denormal
};
std::string_view regime_name(regime_kind k);
std::optional<regime_kind> parse_regime_kind(std::string_view name);

struct regime_tolerance {
  double atol = 0, rtol = 0;
};

struct regime_spec {
  regime_kind kind = regime_kind::normal;
  int min_exp = -3, max_exp = 2;             // scaled
  double min_shift = 10, max_shift = 1000;   // shifted
  double relative_sd = 1e-3;                 // low_variance
  // The tolerance of this regime by output dtype; empty: the task's own tolerance.
  std::map<dtype, regime_tolerance> tolerance;
  std::string name() const { return std::string(regime_name(kind)); }
  nlohmann::json to_json() const; // {"name", the kind's parameters, "tolerance" if any}
};

// All seven regimes with their default parameters, normal first: a task that declares none.
std::vector<regime_spec> default_regimes();

// Parses a task file's "regimes" entry: a name ("ties") or an object {"name": ..., parameters,
// "tolerance": {dtype: {"atol", "rtol"}}}. Throws std::invalid_argument naming the problem
// (unknown name or parameter, min_exp > max_exp, a non-positive shift or sd).
regime_spec parse_regime(const nlohmann::json& j);

// Fills every element of x (a floating dtype; any shape, rows along the last dimension) in the
// regime, each value drawn in double and rounded once to x's dtype. Deterministic in r's state.
void fill_activation(host_tensor& x, const regime_spec& spec, rng& r);

// The last partial block of a row of `cols` elements for every power-of-two block size >= 32:
// [cols - cols % 32, cols) when cols % 32 != 0, else just the last element. tail_extreme puts the
// row's extremes there.
std::pair<std::int64_t, std::int64_t> partial_tail(std::int64_t cols);

} // namespace kg
