// Strict fast_p with two denominators. KernelBench's rule: a task counts at threshold p when it
// is correct AND baseline_time / candidate_time > p (strictly: a tie at p = 1 does not count).
// kernelgate reports it over the intended task set (every task meant to be evaluated; a missing
// result counts as not fast and is reported as missing, never as a measured failure) and over the
// aligned set (tasks that have a baseline), and keeps the reason for every exclusion.
//
// Next to it: Wilson intervals and a task-level bootstrap interval for each fraction, a
// noise-aware count (a task counts only when the lower bound of its speedup interval exceeds p)
// and the near-ties at each p (tasks a re-measurement could flip).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stats/proportion.h"

namespace kg {

struct task_outcome {
  std::string task;
  bool evaluated = false;             // false: no result (missing)
  bool correct = false;               // meaningful when evaluated
  std::optional<double> baseline_ms;  // absent: the task has no baseline (not aligned)
  std::optional<double> candidate_ms; // absent for missing or failed evaluations
  // Aligned-set membership. Unset: aligned iff baseline_ms is present. Readers that know more set
  // it: an empty string keeps the task aligned (a missing result whose baseline is unknown still
  // counts as not fast), a non-empty string excludes the task with that reason.
  std::optional<std::string> exclusion;
  // A measured speedup (e.g. kernelgate eval's ABBA-paired estimate), used instead of
  // baseline_ms / candidate_ms when present; speedup_ci95 is its 95% interval.
  std::optional<double> speedup;
  std::optional<interval> speedup_ci95;
  bool judged = true; // false: evaluated, but the candidate could not be judged (bad reference)
  std::string note;   // status text shown with missing tasks (why it is missing)
};

// Whether the task is in the aligned set, and the reason when it is not.
bool is_aligned(const task_outcome& t);
std::string exclusion_reason(const task_outcome& t);
// The speedup of a correct, timed, aligned task (its measured speedup, else baseline_ms /
// candidate_ms); nullopt otherwise.
std::optional<double> task_speedup(const task_outcome& t);

struct fast_p_options {
  double min_effect = 0.03; // relative band around p inside which a point speedup is a near-tie
  double confidence = 0.95;
  // Why the source never carries speedup intervals (e.g. KernelBench files). Non-empty: the
  // noise-aware count is unavailable with this reason, whatever the tasks hold.
  std::string no_interval_reason;
};

struct near_tie {
  std::string task;
  double speedup = 0;
  std::optional<interval> ci95;
  bool interval_contains_p = false, within_min_effect = false;
};

struct noise_aware_fast_p {
  bool available = false;
  std::string reason; // why it is unavailable
  int fast = 0;       // correct, aligned, and the speedup interval's lower bound > p
  double fast_p_intended = 0, fast_p_aligned = 0;
  interval wilson_intended{}, wilson_aligned{};
};

struct fast_p_score {
  double p = 1.0;
  double min_effect = 0.03;
  int intended = 0, aligned = 0;
  int fast = 0, correct = 0, incorrect = 0, missing = 0, unjudged = 0;
  double fast_p_intended = 0, fast_p_aligned = 0; // 0 when the denominator is 0 (as KernelBench)
  interval ci_intended{}, ci_aligned{};           // task-level bootstrap (exact, see below)
  interval wilson_intended{}, wilson_aligned{};
  noise_aware_fast_p noise_aware;
  std::vector<near_tie> near_ties;
  std::vector<std::pair<std::string, std::string>> exclusions; // task, reason (aligned set)
  // Fractions and intervals over an empty denominator are null; exclusions are left out when
  // the caller lists them once for every p.
  nlohmann::json to_json(bool with_exclusions = true) const;
};

fast_p_score score_fast_p(std::span<const task_outcome> tasks, double p,
                          const fast_p_options& opt = {});

// Percentile bootstrap interval of a fraction k / n over tasks, computed exactly: resampling n
// tasks with replacement makes the resampled count Binomial(n, k / n), so the interval is read
// from that distribution's quantiles (the limit of infinitely many resamples, no Monte Carlo
// error, O(n)). lo = smallest c / n with P(X <= c) >= (1 - confidence) / 2; hi likewise at
// (1 + confidence) / 2. n = 0 gives [0, 1].
interval task_bootstrap_interval(int k, int n, double confidence = 0.95);

// Geometric mean of baseline / candidate over correct aligned tasks, computed in log space
// (KernelBench multiplies raw ratios, which overflows on large suites). nullopt when none.
std::optional<double> geomean_speedup(std::span<const task_outcome> tasks);

} // namespace kg
