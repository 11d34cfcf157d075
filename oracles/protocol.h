// A protocol is how a checker decides: which inputs it generates (by role), how many trials, and
// which comparator per dtype. Presets model the peers exactly as docs/architecture.md (Checker
// presets) describes them, from each peer's public source at a named revision, so an audit can
// show what each one would let through; `strict` is kernelgate's.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "oracles/comparators.h"
#include "workloads/generators.h"

namespace kg {

enum class input_role { activation, norm_weight, norm_bias, indices };
std::string_view input_role_name(input_role r);

struct input_decl {
  std::string name;
  input_role role = input_role::activation;
  dtype type = dtype::float32;
  std::vector<std::int64_t> shape;
  std::int64_t index_upper = 0; // indices: values drawn from [0, index_upper)
};

struct protocol {
  std::string name;
  std::string models; // the peer and revision it models, or "kernelgate"
  activation_kind activation = activation_kind::normal;
  param_regime params = param_regime::identity;
  int trials = 1;                     // input draws (fresh seeds each) ...
  std::vector<double> scales = {1.0}; // ... each evaluated at these activation scales
  bool tail_shape = false;            // also run the task's tail-crossing second shape
  comparator_spec comparator_fp32;    // float32 and float64 outputs
  comparator_spec comparator_low;     // float16 and bfloat16 outputs
  // The checker's time rule, where its source has one: one evaluation of a candidate (its
  // compile and `budget_calls` calls) must finish within `budget_seconds`, else it is not counted
  // correct. 0: none modelled.
  double budget_seconds = 0;
  int budget_calls = 0;
  std::string notes;

  const comparator_spec& comparator_for(dtype t) const;
  // The longest call the time rule lets pass: budget_seconds / budget_calls (an upper bound: the
  // compile shares the budget); 0 without a rule.
  double call_allowance_seconds() const;
  nlohmann::json to_json() const;
};

std::span<const std::string_view> protocol_names();
std::optional<protocol> find_protocol(std::string_view name);

struct protocol_trial {
  std::string label;               // "draw 2", "scale x-1", "tail shape 7x161", ...
  std::vector<host_tensor> inputs; // in the order of the declarations
};

// The inputs a protocol would really generate for a task. `shapes(variant)` returns the task's
// input declarations: variant 0 is its primary shape, variant 1 its tail-crossing shape.
std::vector<protocol_trial>
generate_trials(const protocol& p,
                const std::function<std::vector<input_decl>(int variant)>& shapes,
                std::uint64_t seed);

} // namespace kg
