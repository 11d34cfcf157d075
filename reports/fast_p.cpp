#include "reports/fast_p.h"

#include <cmath>
#include <stdexcept>

namespace kg {

namespace {
bool speedup_above(const task_outcome& t, double p) {
  return t.evaluated && t.correct && t.baseline_ms && t.candidate_ms && *t.candidate_ms > 0 &&
         *t.baseline_ms / *t.candidate_ms > p;
}

bootstrap_interval proportion_ci(const std::vector<double>& indicator, double estimate,
                                 bootstrap_options opt) {
  if (indicator.size() < 2) {
    bootstrap_interval ci;
    ci.estimate = ci.lo = ci.hi = estimate;
    return ci;
  }
  opt.method = ci_method::percentile; // BCa is unstable for 0/1 data with few tasks
  return bootstrap_mean(indicator, opt);
}
} // namespace

fast_p_score score_fast_p(std::span<const task_outcome> tasks, double p,
                          const bootstrap_options& opt) {
  if (!(p >= 0)) throw std::invalid_argument("fast_p threshold must be >= 0");
  fast_p_score s;
  s.p = p;
  std::vector<double> ind_intended, ind_aligned;
  for (const auto& t : tasks) {
    ++s.intended;
    const bool fast = speedup_above(t, p);
    if (!t.evaluated)
      ++s.missing;
    else if (t.correct)
      ++s.correct;
    else
      ++s.incorrect;
    ind_intended.push_back(fast ? 1.0 : 0.0);
    if (!t.baseline_ms) {
      s.exclusions.emplace_back(t.task, "no baseline: excluded from the aligned denominator");
      continue;
    }
    ++s.aligned;
    ind_aligned.push_back(fast ? 1.0 : 0.0);
    if (fast) ++s.fast;
  }
  s.fast_p_intended = s.intended ? static_cast<double>(s.fast) / s.intended : 0.0;
  s.fast_p_aligned = s.aligned ? static_cast<double>(s.fast) / s.aligned : 0.0;
  s.ci_intended = proportion_ci(ind_intended, s.fast_p_intended, opt);
  s.ci_aligned = proportion_ci(ind_aligned, s.fast_p_aligned, opt);
  return s;
}

std::optional<double> geomean_speedup(std::span<const task_outcome> tasks) {
  double sum = 0;
  int n = 0;
  for (const auto& t : tasks) {
    if (!t.evaluated || !t.correct || !t.baseline_ms || !t.candidate_ms || *t.candidate_ms <= 0)
      continue;
    sum += std::log(*t.baseline_ms / *t.candidate_ms);
    ++n;
  }
  if (n == 0) return std::nullopt;
  return std::exp(sum / n);
}

nlohmann::json fast_p_score::to_json() const {
  nlohmann::json ex = nlohmann::json::array();
  for (const auto& [task, reason] : exclusions)
    ex.push_back({{"task", task}, {"reason", reason}});
  return {{"p", p},
          {"rule", "correct and baseline/candidate > p (strict)"},
          {"intended", intended},
          {"aligned", aligned},
          {"fast", fast},
          {"correct", correct},
          {"incorrect", incorrect},
          {"missing", missing},
          {"fast_p_intended", fast_p_intended},
          {"fast_p_aligned", fast_p_aligned},
          {"ci95_intended", {ci_intended.lo, ci_intended.hi}},
          {"ci95_aligned", {ci_aligned.lo, ci_aligned.hi}},
          {"exclusions", ex}};
}

} // namespace kg
