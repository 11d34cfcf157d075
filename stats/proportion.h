// Confidence intervals for a proportion (k successes of n): how sure an audit can be about the
// rate at which a checker lets a fault family through.
#pragma once

namespace kg {

struct interval {
  double lo = 0.0;
  double hi = 1.0;
};

// Wilson score interval (normal approximation with continuity of the score test).
interval wilson_interval(int k, int n, double confidence = 0.95);
// Clopper-Pearson exact interval from beta quantiles (Boost.Math); conservative.
interval clopper_pearson_interval(int k, int n, double confidence = 0.95);

} // namespace kg
