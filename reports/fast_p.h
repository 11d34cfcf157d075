// Strict fast_p with two denominators. KernelBench's rule: a task counts at threshold p when it
// is correct AND baseline_time / candidate_time > p (strictly: a tie at p = 1 does not count).
// kernelgate reports it over the intended task set (every task meant to be evaluated; a missing
// result counts as not fast and is reported as missing, never as a measured failure) and over the
// aligned set (tasks that have a baseline), and keeps the reason for every exclusion.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stats/bootstrap.h"

namespace kg {

struct task_outcome {
  std::string task;
  bool evaluated = false;             // false: no result (missing)
  bool correct = false;               // meaningful when evaluated
  std::optional<double> baseline_ms;  // absent: the task has no baseline (not aligned)
  std::optional<double> candidate_ms; // absent for missing or failed evaluations
};

struct fast_p_score {
  double p = 1.0;
  int intended = 0, aligned = 0;
  int fast = 0, correct = 0, incorrect = 0, missing = 0;
  double fast_p_intended = 0, fast_p_aligned = 0;
  bootstrap_interval ci_intended{}, ci_aligned{};              // over tasks, percentile
  std::vector<std::pair<std::string, std::string>> exclusions; // task, reason (aligned set)
  nlohmann::json to_json() const;
};

fast_p_score score_fast_p(std::span<const task_outcome> tasks, double p,
                          const bootstrap_options& opt = {});

// Geometric mean of baseline / candidate over correct aligned tasks, computed in log space
// (KernelBench multiplies raw ratios, which overflows on large suites). nullopt when none.
std::optional<double> geomean_speedup(std::span<const task_outcome> tasks);

} // namespace kg
