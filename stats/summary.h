// Robust summaries of timing samples.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace kg {

struct sample_summary {
  std::size_t n = 0;
  double median = 0, q1 = 0, q3 = 0, mad = 0; // mad: median absolute deviation (unscaled)
  double mean = 0, stdev = 0, min = 0, max = 0;
};

// Quantile p in [0, 1] of ascending `sorted` values, linear interpolation between order
// statistics (Hyndman-Fan type 7, the default of R and numpy).
double quantile_sorted(std::span<const double> sorted, double p);
double median(std::span<const double> x);
sample_summary summarize(std::span<const double> x);

} // namespace kg
