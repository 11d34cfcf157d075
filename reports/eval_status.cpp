#include "reports/eval_status.h"

#include "base/name_table.h"

namespace kg {
namespace {

constexpr name_table<eval_status, 11> status_names{{
    {eval_status::passed, "PASSED"},
    {eval_status::incorrect_shape, "INCORRECT_SHAPE"},
    {eval_status::incorrect_numerical, "INCORRECT_NUMERICAL"},
    {eval_status::incorrect_dtype, "INCORRECT_DTYPE"},
    {eval_status::runtime_error, "RUNTIME_ERROR"},
    {eval_status::compile_error, "COMPILE_ERROR"},
    {eval_status::timeout, "TIMEOUT"},
    {eval_status::reward_hack, "REWARD_HACK"},
    {eval_status::invalid_reference, "INVALID_REFERENCE"},
    {eval_status::missing, "MISSING"},
    {eval_status::nondeterministic, "NONDETERMINISTIC"},
}};

} // namespace

std::string_view status_name(eval_status s) {
  return name_of(status_names, s);
}

std::optional<eval_status> parse_eval_status(std::string_view name) {
  return parse_name(status_names, name);
}

std::vector<eval_status> all_eval_statuses() {
  std::vector<eval_status> all;
  for (const auto& [s, name] : status_names)
    all.push_back(s);
  return all;
}

} // namespace kg
