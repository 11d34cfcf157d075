// `kernelgate compare BASE NEW`: two suite runs compared workload by workload (the decisions come
// from reports/run_compare.h; this prints them, writes the result and picks the exit code).
#pragma once

#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "stats/decision.h"

namespace kg {

// The options of `kernelgate compare` (help texts in suite/cli.cpp).
struct compare_command_options {
  std::string base, next; // BASE and NEW: a run's folder or its result.json
  // Instead of BASE (NEW then comes alone): a history database's last run of NEW's suite that
  // passed every gate, or with baseline_rev the last at that git revision (reports/run_history.h).
  std::optional<std::string> baseline_from, baseline_rev;
  double min_effect = default_min_effect;
  bool allow_env_change = false;
  std::optional<std::filesystem::path> out;
  bool json = false;
  // Not on the command line: the interval's resamples (tests lower it to stay fast).
  int resamples = 10000;
};

// Exit 0 no regression, 1 a workload SLOWER or a gate failing in NEW, 2 bad input (a run missing,
// malformed, unfinished or not a suite run; environments that differ without
// --allow-env-change; an unusable --out; a --baseline-from database absent, corrupt or without
// a matching run).
int run_compare_command(const compare_command_options& o, const std::vector<std::string>& argv,
                        std::ostream& out, std::ostream& err);

} // namespace kg
