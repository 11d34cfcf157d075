// The status of an evaluated (task, candidate) pair: a closed set, written in records by name.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace kg {

enum class eval_status {
  passed,
  incorrect_shape,
  incorrect_numerical,
  incorrect_dtype,
  runtime_error,
  compile_error,
  timeout,
  reward_hack,
  invalid_reference,
  missing,
  nondeterministic,
};

// "PASSED", "INCORRECT_NUMERICAL", ... (docs/result-schema.md); parse_eval_status reads them.
std::string_view status_name(eval_status s);
std::optional<eval_status> parse_eval_status(std::string_view name);
std::vector<eval_status> all_eval_statuses();

} // namespace kg
