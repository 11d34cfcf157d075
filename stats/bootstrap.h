// Seeded, reproducible bootstrap confidence intervals. The same samples, options and seed give
// the same interval on any machine (the resampling stream is kernelgate's own RNG).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

namespace kg {

enum class ci_method { percentile, bca };
std::string_view ci_method_name(ci_method m);

struct bootstrap_options {
  int resamples = 10000;
  double confidence = 0.95;
  std::uint64_t seed = 0x6b67'626f'6f74ull; // "kgboot"
  ci_method method = ci_method::bca;
};

struct bootstrap_interval {
  double estimate = 0; // the statistic on the original sample(s)
  double lo = 0, hi = 0;
  ci_method method = ci_method::bca;
  int resamples = 0;
  double confidence = 0;
  std::uint64_t seed = 0;
  double bias_z0 = 0, acceleration = 0; // BCa's corrections (0 for percentile)
};

using statistic = std::function<double(std::span<const double>)>;

// Any statistic of one sample; BCa's acceleration from the jackknife.
bootstrap_interval bootstrap(std::span<const double> x, const statistic& stat,
                             const bootstrap_options& opt = {});
// The median, on a fast path: the sample is sorted once and each resample's median is found by
// counting drawn ranks (O(n) per resample, no sort).
bootstrap_interval bootstrap_median(std::span<const double> x, const bootstrap_options& opt = {});
bootstrap_interval bootstrap_mean(std::span<const double> x, const bootstrap_options& opt = {});
// median(num) / median(den) for two independent samples, each resampled on its own.
bootstrap_interval bootstrap_ratio_of_medians(std::span<const double> num,
                                              std::span<const double> den,
                                              const bootstrap_options& opt = {});
// mean(num) / mean(den) for two independent samples, each resampled on its own (e.g. the
// throughputs of a few repeated traces per configuration, where every repeat counts: a mean, not
// a median, so one slow trace moves the estimate). den must be positive.
bootstrap_interval bootstrap_ratio_of_means(std::span<const double> num,
                                            std::span<const double> den,
                                            const bootstrap_options& opt = {});
// Paired measurements (e.g. ABBA blocks): the median of the per-pair ratios num[i] / den[i],
// resampling pairs so that drift shared by both members of a pair cancels.
bootstrap_interval bootstrap_paired_ratio(std::span<const double> num, std::span<const double> den,
                                          const bootstrap_options& opt = {});
// Geometric mean of positive ratios (e.g. speedups over tasks).
bootstrap_interval bootstrap_geomean(std::span<const double> ratios,
                                     const bootstrap_options& opt = {});

} // namespace kg
