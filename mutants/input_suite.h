// Suite optimization: from which input configurations witness which mutants of a task (the
// witness phase's matrix), the fewest configurations that kill every mutant any allowed
// configuration kills -- the input suite a checker could adopt. A configuration on which a correct
// kernel of the task fails is never allowed (a checker using it would reject correct code).
// Chosen on a development split of the mutants, reported on the held-out split: a suite that
// only fits the mutants it was chosen on shows it there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "stats/proportion.h"

namespace kg {

struct cover_problem {
  std::vector<std::string> configs; // input configurations (shape, regime, seed), by name
  std::vector<std::string> mutants; // witnessed mutant ids
  // kills[c][m]: configuration c witnesses mutant m (the oracle shows it wrong there).
  std::vector<std::vector<bool>> kills;
  // fails_control[c]: some correct kernel of the task fails on configuration c.
  std::vector<bool> fails_control;
  // Throws std::invalid_argument when the sizes disagree.
  void check() const;
};

struct cover_result {
  std::vector<std::size_t> chosen;      // configuration indices, in the order picked
  bool minimal = false;                 // proven the fewest (exact search), not only greedy's
  std::vector<std::size_t> uncoverable; // mutants of the subset no allowed configuration kills
};

// Greedy set cover over the mutants in `subset` (indices into problem.mutants): each round takes
// the allowed configuration that kills the most mutants not yet killed (ties: the lower index).
cover_result greedy_cover(const cover_problem& p, const std::vector<std::size_t>& subset);

// The fewest configurations, by exhaustive search over subsets smaller than greedy's answer when
// the allowed configurations number at most `exact_limit` (C(20, k) subsets a size at most:
// milliseconds); greedy's answer otherwise (minimal = false).
cover_result minimum_cover(const cover_problem& p, const std::vector<std::size_t>& subset,
                           std::size_t exact_limit = 20);

// The development / held-out split: a mutant whose id's last hex digit is even is development,
// odd held out. Ids are SHA-256 prefixes, so the split is a fair coin per mutant, the same on
// every machine and run. An id not ending in a hex digit throws std::invalid_argument.
bool held_out(std::string_view mutant_id);

struct input_suite {
  cover_result cover;                  // chosen on the development split
  std::vector<std::string> configs;    // the chosen configurations' names
  std::vector<std::string> disallowed; // configurations a correct kernel fails
  int dev_mutants = 0, dev_killed = 0; // development split, and how many the suite kills
  int held_out_mutants = 0, held_out_killed = 0;
  interval held_out_ci95; // Wilson, of held_out_killed / held_out_mutants
  nlohmann::json to_json() const;
};

input_suite suggest_input_suite(const cover_problem& p, std::size_t exact_limit = 20);

} // namespace kg
