#include "stats/summary.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace kg {

double quantile_sorted(std::span<const double> s, double p) {
  if (s.empty()) throw std::invalid_argument("quantile of an empty sample");
  if (!(p >= 0.0 && p <= 1.0)) throw std::invalid_argument("quantile p must lie in [0, 1]");
  const double h = p * static_cast<double>(s.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(h));
  const std::size_t hi = std::min(lo + 1, s.size() - 1);
  return s[lo] + (h - static_cast<double>(lo)) * (s[hi] - s[lo]);
}

double median(std::span<const double> x) {
  std::vector<double> v(x.begin(), x.end());
  std::sort(v.begin(), v.end());
  return quantile_sorted(v, 0.5);
}

sample_summary summarize(std::span<const double> x) {
  if (x.empty()) throw std::invalid_argument("summary of an empty sample");
  std::vector<double> v(x.begin(), x.end());
  std::sort(v.begin(), v.end());
  sample_summary s;
  s.n = v.size();
  s.min = v.front();
  s.max = v.back();
  s.median = quantile_sorted(v, 0.5);
  s.q1 = quantile_sorted(v, 0.25);
  s.q3 = quantile_sorted(v, 0.75);
  double sum = 0;
  for (double d : v)
    sum += d;
  s.mean = sum / static_cast<double>(s.n);
  double ss = 0;
  for (double d : v)
    ss += (d - s.mean) * (d - s.mean);
  s.stdev = s.n > 1 ? std::sqrt(ss / static_cast<double>(s.n - 1)) : 0.0;
  std::vector<double> dev(v.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    dev[i] = std::fabs(v[i] - s.median);
  std::sort(dev.begin(), dev.end());
  s.mad = quantile_sorted(dev, 0.5);
  return s;
}

} // namespace kg
