#include "stats/proportion.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <boost/math/distributions/beta.hpp>
#include <boost/math/distributions/normal.hpp>

namespace kg {

static void check(int k, int n, double confidence) {
  if (n < 0 || k < 0 || k > n) throw std::invalid_argument("proportion needs 0 <= k <= n");
  if (!(confidence > 0.0 && confidence < 1.0))
    throw std::invalid_argument("confidence must lie in (0, 1)");
}

interval wilson_interval(int k, int n, double confidence) {
  check(k, n, confidence);
  if (n == 0) return {0.0, 1.0};
  const double z = boost::math::quantile(boost::math::normal(), 0.5 + confidence / 2.0);
  const double p = static_cast<double>(k) / n, z2 = z * z;
  const double denom = 1.0 + z2 / n;
  const double centre = (p + z2 / (2.0 * n)) / denom;
  const double half = z * std::sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denom;
  return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

interval clopper_pearson_interval(int k, int n, double confidence) {
  check(k, n, confidence);
  if (n == 0) return {0.0, 1.0};
  const double alpha = 1.0 - confidence;
  interval out;
  out.lo = k == 0
               ? 0.0
               : boost::math::quantile(boost::math::beta_distribution<>(k, n - k + 1), alpha / 2.0);
  out.hi = k == n ? 1.0
                  : boost::math::quantile(boost::math::beta_distribution<>(k + 1, n - k),
                                          1.0 - alpha / 2.0);
  return out;
}

} // namespace kg
