#include "workloads/load_search.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace kg {

load_search_result search_load(const std::function<load_point(double)>& measure,
                               const load_search_options& opt) {
  load_search_result r;
  double rps = opt.start_rps;
  for (int i = 0; i < opt.max_steps; ++i, rps *= 1.0 + opt.step) {
    const load_point p = measure(rps);
    r.points.push_back(p);
    if (p.p99_itl_ms > opt.limit_ms) return r;
    r.found = true;
    r.best = p;
  }
  r.limit_never_exceeded = true;
  return r;
}

bracketed_search_result search_load_bracketed(const std::function<load_point(double)>& measure,
                                              const bracketed_search_options& opt) {
  bracketed_search_result r;
  auto within = [&](const load_point& p) {
    return std::isfinite(p.p99_itl_ms) && p.p99_itl_ms <= opt.limit_ms;
  };
  auto try_load = [&](double rps) {
    const load_point p = measure(rps);
    r.points.push_back(p);
    if (within(p)) {
      if (!r.found || rps > r.best.offered_rps) r.best = p;
      r.found = true;
      r.bracket_lo_rps = std::max(r.bracket_lo_rps, rps);
    } else if (!r.crossed || rps < r.bracket_hi_rps) {
      r.crossed = true;
      r.bracket_hi_rps = rps;
    }
    return within(p);
  };
  // Grow until the limit breaks (or the throughput stops growing).
  double rps = opt.start_rps, best_tps = 0;
  int flat = 0;
  while (static_cast<int>(r.points.size()) < opt.max_steps) {
    if (!try_load(rps)) break;
    const double tps = r.points.back().tokens_per_second;
    flat = tps >= best_tps * (1 + opt.saturation_gain) ? 0 : flat + 1;
    best_tps = std::max(best_tps, tps);
    if (opt.saturation_loads > 0 && flat >= opt.saturation_loads) {
      r.saturated = true;
      break;
    }
    rps *= opt.growth;
  }
  if (!r.crossed) {
    r.limit_never_exceeded = true;
    return r;
  }
  // Narrow the bracket; with nothing within the limit, below the first load tried.
  for (int i = 0; i < opt.bisections && static_cast<int>(r.points.size()) < opt.max_steps; ++i) {
    const double lo = r.found ? r.bracket_lo_rps : r.bracket_hi_rps / opt.growth;
    try_load(std::sqrt(lo * r.bracket_hi_rps));
  }
  return r;
}

limit_crossing interpolate_limit(const load_point& lo, const load_point& hi, double limit_ms) {
  if (!(lo.offered_rps > 0 && hi.offered_rps > lo.offered_rps))
    throw std::invalid_argument("interpolate_limit: needs 0 < lo < hi loads");
  limit_crossing c;
  if (!std::isfinite(lo.p99_itl_ms) || lo.p99_itl_ms > limit_ms) {
    c.clamped = -1; // beyond the limit already at lo (a non-finite p99 counts as beyond)
  } else if (std::isfinite(hi.p99_itl_ms) && hi.p99_itl_ms <= limit_ms) {
    c.clamped = 1;
    c.fraction = 1;
  } else if (std::isfinite(hi.p99_itl_ms)) {
    c.fraction = (limit_ms - lo.p99_itl_ms) / (hi.p99_itl_ms - lo.p99_itl_ms);
  } else {
    c.clamped = -1; // nothing to interpolate towards: the crossing is taken at lo
  }
  c.offered_rps = lo.offered_rps * std::pow(hi.offered_rps / lo.offered_rps, c.fraction);
  c.tokens_per_second =
      lo.tokens_per_second + c.fraction * (hi.tokens_per_second - lo.tokens_per_second);
  return c;
}

inter_token_summary
summarize_inter_token_ms(const std::vector<std::vector<double>>& token_times_ms) {
  std::vector<double> gaps;
  for (const auto& seq : token_times_ms)
    for (std::size_t k = 1; k < seq.size(); ++k)
      gaps.push_back(seq[k] - seq[k - 1]);
  inter_token_summary s;
  if (gaps.empty()) return s;
  std::sort(gaps.begin(), gaps.end());
  // Nearest rank: the smallest gap with at least a share q of the gaps at or below it.
  auto rank = [&](double q) {
    const auto r = static_cast<std::size_t>(std::ceil(q * static_cast<double>(gaps.size())));
    return gaps[std::max<std::size_t>(r, 1) - 1];
  };
  s.gaps = gaps.size();
  s.p50_ms = rank(0.50);
  s.p90_ms = rank(0.90);
  s.p99_ms = rank(0.99);
  s.max_ms = gaps.back();
  return s;
}

double p99_inter_token_ms(const std::vector<std::vector<double>>& token_times_ms) {
  return summarize_inter_token_ms(token_times_ms).p99_ms;
}

} // namespace kg
