#include "stats/bootstrap.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <vector>

#include <boost/math/distributions/normal.hpp>

#include "stats/summary.h"
#include "base/rng.h"

namespace kg {

std::string_view ci_method_name(ci_method m) {
  return m == ci_method::bca ? "bca" : "percentile";
}

namespace {

void check(std::span<const double> x, const bootstrap_options& opt) {
  if (x.size() < 2) throw std::invalid_argument("bootstrap needs at least two samples");
  if (opt.resamples < 100) throw std::invalid_argument("bootstrap needs at least 100 resamples");
  if (!(opt.confidence > 0 && opt.confidence < 1))
    throw std::invalid_argument("confidence must lie in (0, 1)");
}

// Index in [0, n): Lemire's multiply-shift on 32 random bits. Its bias (< n / 2^32) is far below
// the Monte Carlo error of any interval here, and it avoids a division per draw.
inline std::uint32_t draw(rng& r, std::uint32_t n) {
  return static_cast<std::uint32_t>(((r.next_u64() >> 32) * n) >> 32);
}

const boost::math::normal& std_normal() {
  static const boost::math::normal n;
  return n;
}

// Turns replicate statistics into an interval (percentile or BCa).
bootstrap_interval finish(double estimate, std::vector<double>& reps,
                          const std::vector<double>& jackknife, const bootstrap_options& opt) {
  bootstrap_interval out;
  out.estimate = estimate;
  out.method = opt.method;
  out.resamples = opt.resamples;
  out.confidence = opt.confidence;
  out.seed = opt.seed;
  std::sort(reps.begin(), reps.end());
  const double alpha = (1.0 - opt.confidence) / 2.0;
  double p_lo = alpha, p_hi = 1.0 - alpha;
  if (opt.method == ci_method::bca) {
    // Bias correction: the share of replicates below the estimate (ties count half: resampled
    // medians often equal the estimate exactly).
    const auto below = std::lower_bound(reps.begin(), reps.end(), estimate) - reps.begin();
    const auto not_above = std::upper_bound(reps.begin(), reps.end(), estimate) - reps.begin();
    double share = (static_cast<double>(below) + 0.5 * static_cast<double>(not_above - below)) /
                   static_cast<double>(reps.size());
    share = std::clamp(share, 0.5 / reps.size(), 1.0 - 0.5 / reps.size());
    const double z0 = boost::math::quantile(std_normal(), share);
    const double mean_j =
        std::accumulate(jackknife.begin(), jackknife.end(), 0.0) / jackknife.size();
    double num = 0, den = 0;
    for (double j : jackknife) {
      const double d = mean_j - j;
      num += d * d * d;
      den += d * d;
    }
    const double a = den > 0 ? num / (6.0 * std::pow(den, 1.5)) : 0.0;
    auto adjust = [&](double p) {
      const double z = boost::math::quantile(std_normal(), p);
      return boost::math::cdf(std_normal(), z0 + (z0 + z) / (1.0 - a * (z0 + z)));
    };
    p_lo = adjust(alpha);
    p_hi = adjust(1.0 - alpha);
    out.bias_z0 = z0;
    out.acceleration = a;
  }
  out.lo = quantile_sorted(reps, std::clamp(p_lo, 0.0, 1.0));
  out.hi = quantile_sorted(reps, std::clamp(p_hi, 0.0, 1.0));
  return out;
}

// Median of the sorted sample with element `skip` left out (skip = n: nothing left out).
double median_without(const std::vector<double>& s, std::size_t skip) {
  const std::size_t n = skip < s.size() ? s.size() - 1 : s.size();
  auto at = [&](std::size_t rank) { return s[rank < skip ? rank : rank + 1]; };
  return n % 2 ? at(n / 2) : 0.5 * (at(n / 2 - 1) + at(n / 2));
}

// Draws the medians of `count` resamples of ascending `s`. A resample is a multiset of ranks;
// its median is found by walking the rank counts to the middle, no sort needed.
void resample_medians(const std::vector<double>& s, rng& r, std::vector<double>& out) {
  const auto n = static_cast<std::uint32_t>(s.size());
  std::vector<std::uint32_t> counts(n);
  const std::uint32_t k_lo = (n - 1) / 2, k_hi = n / 2; // ranks of the middle element(s)
  for (double& m : out) {
    std::fill(counts.begin(), counts.end(), 0u);
    for (std::uint32_t i = 0; i < n; ++i)
      ++counts[draw(r, n)];
    std::uint32_t seen = 0, i = 0;
    while (seen + counts[i] <= k_lo)
      seen += counts[i++];
    const double lo = s[i];
    while (seen + counts[i] <= k_hi)
      seen += counts[i++];
    m = 0.5 * (lo + s[i]);
  }
}

std::vector<double> sorted(std::span<const double> x) {
  std::vector<double> s(x.begin(), x.end());
  std::sort(s.begin(), s.end());
  return s;
}

std::vector<double> jackknife_medians(const std::vector<double>& s) {
  std::vector<double> j(s.size());
  for (std::size_t i = 0; i < s.size(); ++i)
    j[i] = median_without(s, i);
  return j;
}

} // namespace

bootstrap_interval bootstrap(std::span<const double> x, const statistic& stat,
                             const bootstrap_options& opt) {
  check(x, opt);
  rng r(opt.seed, stream_id("bootstrap"));
  const auto n = static_cast<std::uint32_t>(x.size());
  std::vector<double> buf(n), reps(static_cast<std::size_t>(opt.resamples));
  for (double& rep : reps) {
    for (auto& b : buf)
      b = x[draw(r, n)];
    rep = stat(buf);
  }
  std::vector<double> jack(n);
  if (opt.method == ci_method::bca) {
    std::vector<double> loo(n - 1);
    for (std::uint32_t i = 0; i < n; ++i) {
      std::copy(x.begin(), x.begin() + i, loo.begin());
      std::copy(x.begin() + i + 1, x.end(), loo.begin() + i);
      jack[i] = stat(loo);
    }
  }
  return finish(stat(x), reps, jack, opt);
}

bootstrap_interval bootstrap_median(std::span<const double> x, const bootstrap_options& opt) {
  check(x, opt);
  const auto s = sorted(x);
  rng r(opt.seed, stream_id("bootstrap"));
  std::vector<double> reps(static_cast<std::size_t>(opt.resamples));
  resample_medians(s, r, reps);
  return finish(median_without(s, s.size()), reps, jackknife_medians(s), opt);
}

bootstrap_interval bootstrap_mean(std::span<const double> x, const bootstrap_options& opt) {
  return bootstrap(
      x,
      [](std::span<const double> v) {
        return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
      },
      opt);
}

bootstrap_interval bootstrap_ratio_of_medians(std::span<const double> num,
                                              std::span<const double> den,
                                              const bootstrap_options& opt) {
  check(num, opt);
  check(den, opt);
  const auto sn = sorted(num), sd = sorted(den);
  rng rn(opt.seed, stream_id("bootstrap-num")), rd(opt.seed, stream_id("bootstrap-den"));
  std::vector<double> mn(static_cast<std::size_t>(opt.resamples)), md(mn.size());
  resample_medians(sn, rn, mn);
  resample_medians(sd, rd, md);
  for (std::size_t i = 0; i < mn.size(); ++i)
    mn[i] /= md[i];
  // Two-sample jackknife: leave one observation out of either sample.
  const double full_n = median_without(sn, sn.size()), full_d = median_without(sd, sd.size());
  std::vector<double> jack;
  for (std::size_t i = 0; i < sn.size(); ++i)
    jack.push_back(median_without(sn, i) / full_d);
  for (std::size_t i = 0; i < sd.size(); ++i)
    jack.push_back(full_n / median_without(sd, i));
  return finish(full_n / full_d, mn, jack, opt);
}

bootstrap_interval bootstrap_ratio_of_means(std::span<const double> num,
                                            std::span<const double> den,
                                            const bootstrap_options& opt) {
  check(num, opt);
  check(den, opt);
  for (const double d : den)
    if (!(d > 0)) throw std::invalid_argument("ratio of means needs positive denominators");
  auto mean = [](std::span<const double> v) {
    return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  };
  // Each sample's resample means from its own stream (the same streams ratio_of_medians uses).
  auto resample_means = [&](std::span<const double> x, rng& r) {
    const auto n = static_cast<std::uint32_t>(x.size());
    std::vector<double> out(static_cast<std::size_t>(opt.resamples));
    for (double& m : out) {
      double sum = 0;
      for (std::uint32_t i = 0; i < n; ++i)
        sum += x[draw(r, n)];
      m = sum / static_cast<double>(n);
    }
    return out;
  };
  rng rn(opt.seed, stream_id("bootstrap-num")), rd(opt.seed, stream_id("bootstrap-den"));
  auto mn = resample_means(num, rn);
  const auto md = resample_means(den, rd);
  for (std::size_t i = 0; i < mn.size(); ++i)
    mn[i] /= md[i];
  // Two-sample jackknife: leave one observation out of either sample.
  const double full_n = mean(num), full_d = mean(den);
  auto mean_without = [](std::span<const double> x, std::size_t skip, double full) {
    const double n = static_cast<double>(x.size());
    return (full * n - x[skip]) / (n - 1);
  };
  std::vector<double> jack;
  for (std::size_t i = 0; i < num.size(); ++i)
    jack.push_back(mean_without(num, i, full_n) / full_d);
  for (std::size_t i = 0; i < den.size(); ++i)
    jack.push_back(full_n / mean_without(den, i, full_d));
  return finish(full_n / full_d, mn, jack, opt);
}

bootstrap_interval bootstrap_paired_ratio(std::span<const double> num, std::span<const double> den,
                                          const bootstrap_options& opt) {
  if (num.size() != den.size()) throw std::invalid_argument("paired samples differ in length");
  std::vector<double> ratios(num.size());
  for (std::size_t i = 0; i < num.size(); ++i) {
    if (!(den[i] > 0)) throw std::invalid_argument("paired ratio needs positive denominators");
    ratios[i] = num[i] / den[i];
  }
  return bootstrap_median(ratios, opt);
}

bootstrap_interval bootstrap_geomean(std::span<const double> ratios, const bootstrap_options& opt) {
  std::vector<double> logs(ratios.size());
  for (std::size_t i = 0; i < ratios.size(); ++i) {
    if (!(ratios[i] > 0)) throw std::invalid_argument("geometric mean needs positive values");
    logs[i] = std::log(ratios[i]);
  }
  auto ci = bootstrap_mean(logs, opt);
  ci.estimate = std::exp(ci.estimate);
  ci.lo = std::exp(ci.lo);
  ci.hi = std::exp(ci.hi);
  return ci;
}

} // namespace kg
