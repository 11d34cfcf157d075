#include "reports/fast_p.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace kg {

bool is_aligned(const task_outcome& t) {
  return t.exclusion ? t.exclusion->empty() : t.baseline_ms.has_value();
}

std::string exclusion_reason(const task_outcome& t) {
  if (t.exclusion) return *t.exclusion;
  return t.baseline_ms ? "" : "no baseline: excluded from the aligned denominator";
}

std::optional<double> task_speedup(const task_outcome& t) {
  if (!t.evaluated || !t.judged || !t.correct || !is_aligned(t)) return std::nullopt;
  if (t.speedup) return *t.speedup > 0 ? t.speedup : std::nullopt;
  if (!t.baseline_ms || !t.candidate_ms || !(*t.candidate_ms > 0)) return std::nullopt;
  return *t.baseline_ms / *t.candidate_ms;
}

interval task_bootstrap_interval(int k, int n, double confidence) {
  if (n < 0 || k < 0 || k > n) throw std::invalid_argument("bootstrap needs 0 <= k <= n");
  if (!(confidence > 0 && confidence < 1))
    throw std::invalid_argument("confidence must lie in (0, 1)");
  if (n == 0) return {0.0, 1.0};
  if (k == 0) return {0.0, 0.0}; // every resample holds only not-fast tasks
  if (k == n) return {1.0, 1.0};
  const double q_lo = (1.0 - confidence) / 2.0, q_hi = (1.0 + confidence) / 2.0;
  const double pr = static_cast<double>(k) / n;
  // log P(X = c), stepped by the ratio of successive binomial terms; starting from (1 - pr)^n in
  // log space keeps large n from underflowing.
  const double log_odds = std::log(pr) - std::log1p(-pr);
  double log_pmf = n * std::log1p(-pr), cdf = 0;
  std::optional<int> lo;
  for (int c = 0; c <= n; ++c) {
    cdf += std::exp(log_pmf);
    if (!lo && cdf >= q_lo) lo = c;
    if (cdf >= q_hi) return {static_cast<double>(*lo) / n, static_cast<double>(c) / n};
    log_pmf += std::log(static_cast<double>(n - c) / (c + 1)) + log_odds;
  }
  // Rounding left the summed probabilities a hair under q_hi: the top of the support.
  return {static_cast<double>(lo.value_or(n)) / n, 1.0};
}

fast_p_score score_fast_p(std::span<const task_outcome> tasks, double p,
                          const fast_p_options& opt) {
  if (!(p >= 0) || !std::isfinite(p)) throw std::invalid_argument("fast_p threshold must be >= 0");
  if (!(opt.min_effect >= 0)) throw std::invalid_argument("min_effect must be >= 0");
  fast_p_score s;
  s.p = p;
  s.min_effect = opt.min_effect;
  int timed = 0, without_interval = 0;
  std::string first_without_interval;
  for (const auto& t : tasks) {
    ++s.intended;
    if (!t.evaluated)
      ++s.missing;
    else if (!t.judged)
      ++s.unjudged;
    else if (t.correct)
      ++s.correct;
    else
      ++s.incorrect;
    if (!is_aligned(t)) {
      s.exclusions.emplace_back(t.task, exclusion_reason(t));
      continue;
    }
    ++s.aligned;
    const auto speedup = task_speedup(t);
    if (!speedup) continue;
    ++timed;
    if (*speedup > p) ++s.fast;
    if (t.speedup_ci95) {
      if (*speedup > p && t.speedup_ci95->lo > p) ++s.noise_aware.fast;
    } else if (++without_interval == 1) {
      first_without_interval = t.task;
    }
    near_tie nt{t.task, *speedup, t.speedup_ci95};
    nt.interval_contains_p = t.speedup_ci95 && t.speedup_ci95->lo <= p && p <= t.speedup_ci95->hi;
    nt.within_min_effect = std::fabs(*speedup - p) <= opt.min_effect * p;
    if (nt.interval_contains_p || nt.within_min_effect) s.near_ties.push_back(std::move(nt));
  }
  auto frac = [](int k, int n) { return n ? static_cast<double>(k) / n : 0.0; };
  s.fast_p_intended = frac(s.fast, s.intended);
  s.fast_p_aligned = frac(s.fast, s.aligned);
  s.ci_intended = task_bootstrap_interval(s.fast, s.intended, opt.confidence);
  s.ci_aligned = task_bootstrap_interval(s.fast, s.aligned, opt.confidence);
  s.wilson_intended = wilson_interval(s.fast, s.intended, opt.confidence);
  s.wilson_aligned = wilson_interval(s.fast, s.aligned, opt.confidence);
  auto& na = s.noise_aware;
  if (without_interval > 0 || !opt.no_interval_reason.empty()) {
    // Counting a task without an interval as not fast would invent a result; the count is
    // withheld instead.
    na.fast = 0;
    if (!opt.no_interval_reason.empty()) {
      na.reason = opt.no_interval_reason;
    } else {
      std::ostringstream r;
      r << without_interval << " of " << timed
        << " correct timed tasks have no speedup interval (first: " << first_without_interval
        << ")";
      na.reason = r.str();
    }
  } else {
    na.available = true;
    na.fast_p_intended = frac(na.fast, s.intended);
    na.fast_p_aligned = frac(na.fast, s.aligned);
    na.wilson_intended = wilson_interval(na.fast, s.intended, opt.confidence);
    na.wilson_aligned = wilson_interval(na.fast, s.aligned, opt.confidence);
  }
  return s;
}

std::optional<double> geomean_speedup(std::span<const task_outcome> tasks) {
  double sum = 0;
  int n = 0;
  for (const auto& t : tasks) {
    const auto speedup = task_speedup(t);
    if (!speedup) continue;
    sum += std::log(*speedup);
    ++n;
  }
  if (n == 0) return std::nullopt;
  return std::exp(sum / n);
}

namespace {
nlohmann::json pair_or_null(const interval& i, int n) {
  return n ? nlohmann::json::array({i.lo, i.hi}) : nlohmann::json(nullptr);
}
nlohmann::json value_or_null(double v, int n) {
  return n ? nlohmann::json(v) : nullptr;
}
} // namespace

nlohmann::json fast_p_score::to_json(bool with_exclusions) const {
  nlohmann::json ties = nlohmann::json::array();
  for (const auto& t : near_ties) {
    nlohmann::json j = {{"task", t.task},
                        {"speedup", t.speedup},
                        {"interval_contains_p", t.interval_contains_p},
                        {"within_min_effect", t.within_min_effect}};
    if (t.ci95) j["speedup_ci95"] = {t.ci95->lo, t.ci95->hi};
    ties.push_back(std::move(j));
  }
  nlohmann::json na = {{"available", noise_aware.available},
                       {"rule", "correct and the speedup interval's lower bound > p"}};
  if (noise_aware.available) {
    na["fast"] = noise_aware.fast;
    na["fast_p_intended"] = value_or_null(noise_aware.fast_p_intended, intended);
    na["fast_p_aligned"] = value_or_null(noise_aware.fast_p_aligned, aligned);
    na["wilson95_intended"] = pair_or_null(noise_aware.wilson_intended, intended);
    na["wilson95_aligned"] = pair_or_null(noise_aware.wilson_aligned, aligned);
  } else {
    na["reason"] = noise_aware.reason;
  }
  nlohmann::json j = {{"p", p},
                      {"rule", "correct and baseline/candidate > p (strict)"},
                      {"intended", intended},
                      {"aligned", aligned},
                      {"fast", fast},
                      {"correct", correct},
                      {"incorrect", incorrect},
                      {"missing", missing},
                      {"unjudged", unjudged},
                      {"fast_p_intended", value_or_null(fast_p_intended, intended)},
                      {"fast_p_aligned", value_or_null(fast_p_aligned, aligned)},
                      {"ci95_intended", pair_or_null(ci_intended, intended)},
                      {"ci95_aligned", pair_or_null(ci_aligned, aligned)},
                      {"ci95_method",
                       "task-level percentile bootstrap, exact (resampled fast count ~ "
                       "Binomial(n, fast/n))"},
                      {"wilson95_intended", pair_or_null(wilson_intended, intended)},
                      {"wilson95_aligned", pair_or_null(wilson_aligned, aligned)},
                      {"noise_aware", std::move(na)},
                      {"min_effect", min_effect},
                      {"near_ties", std::move(ties)}};
  if (with_exclusions) {
    nlohmann::json ex = nlohmann::json::array();
    for (const auto& [task, reason] : exclusions)
      ex.push_back({{"task", task}, {"reason", reason}});
    j["exclusions"] = std::move(ex);
  }
  return j;
}

} // namespace kg
