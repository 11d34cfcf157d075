// Do two checkers give the same verdicts? Two columns of kill matrices (one matrix or two runs'),
// compared cell by cell: e.g. an outside checker audited through `audit checker --cmd` against
// the built-in protocol that models the same rule. Only rows where both gave a verdict (killed
// or accepted) are compared; every other row is counted by why it was left out -- missing is
// unknown, not a disagreement.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "mutants/kill_matrix.h"
#include "stats/proportion.h"

namespace kg {

struct agreement_difference {
  kill_row row;      // from the first matrix
  kill_verdict a, b; // killed or survived, never equal
};

struct checker_agreement {
  std::string checker_a, checker_b;
  int compared = 0; // rows with a verdict (killed or survived) in both
  int same = 0;
  int killed_by_a_only = 0, killed_by_b_only = 0;
  int compared_controls = 0, compared_witnessed = 0; // of `compared`
  // Left out, each row once, the first reason that applies in this order.
  int only_in_a = 0, only_in_b = 0;
  int no_verdict_a = 0, no_verdict_b = 0;        // error, timeout or missing on that side
  std::vector<agreement_difference> differences; // in the first matrix's row order
  double rate() const { return compared ? static_cast<double>(same) / compared : 0.0; }
  interval rate_ci95() const { return wilson_interval(same, compared); }
  nlohmann::json to_json() const;
};

// Column `ca` of `a` against column `cb` of `b`, rows paired by id. A row in both with a
// different task or control flag throws std::invalid_argument naming it (not the same
// candidate); an unknown column throws std::out_of_range.
checker_agreement compare_checkers(const kill_matrix& a, std::string_view ca, const kill_matrix& b,
                                   std::string_view cb);

} // namespace kg
