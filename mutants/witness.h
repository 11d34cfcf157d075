// Witnessing a mutant: run it on every input configuration of its task's witness plan
// (workloads/witness_plan.h) against the fp64 oracle. A mutant that disagrees anywhere is
// witnessed and keeps the first configuration that shows it, with the worst element; one that
// never disagrees is unwitnessed (reported apart, never an escape). Every configuration is run,
// not only up to the first disagreement: the kill row feeds suite optimization (input_suite.h).
// The run itself is a callback -- the candidate on the GPU through the sandbox, a host function in
// the tests -- so the logic is tested without a GPU.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mutants/kill_matrix.h"

namespace kg {

// One input configuration: a shape (the task's, or an extra tail shape), an input regime, how the
// parameter inputs (weights, biases) are drawn, and a seed.
struct input_config {
  std::string name;                         // "<shape>/<regime>/<params>/s<seed>"
  std::string shape;                        // the task's shape name, or "<shape>~tail<value>"
  std::map<std::string, std::int64_t> dims; // every dimension symbol's value
  int regime = 0;                           // index into the task's regimes
  std::string regime_name;                  // "normal", "scaled", ...
  std::string params = "task";              // "task" (the task's draws), "identity", "normal"
  std::uint64_t seed = 1;
  nlohmann::json to_json() const;
};

// Where a run disagreed with the oracle: the output, the element with the largest error over the
// tolerance, both values; or a run that did not finish (crash: "illegal memory access", ...).
struct disagreement {
  std::string output;
  std::int64_t index = -1;
  double got = 0, want = 0, abs_error = 0;
  std::string crash; // non-empty when the candidate did not finish
  nlohmann::json to_json() const;
};

// nullopt: the run agreed with the oracle on this configuration.
using config_check = std::function<std::optional<disagreement>(const input_config&)>;

struct witness_record {
  witness_status status = witness_status::not_run; // witnessed or unwitnessed once run
  std::vector<bool> kills;                         // per plan configuration: it disagreed there
  std::optional<std::size_t> first;                // the first disagreeing configuration
  std::optional<disagreement> evidence;            // what it showed there
  nlohmann::json to_json(const std::vector<input_config>& plan) const;
};

witness_record witness_mutant(const std::vector<input_config>& plan, const config_check& check);

} // namespace kg
