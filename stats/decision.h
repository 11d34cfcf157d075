// Noise-aware decisions for a comparison. The input is an interval for the time ratio
// candidate / baseline (below 1: the candidate is faster).
#pragma once

#include <string_view>

namespace kg {

enum class decision {
  faster,    // the whole interval lies below 1 - min_effect
  slower,    // the whole interval lies above 1 + min_effect
  same,      // the whole interval lies inside [1 - min_effect, 1 + min_effect]
  ambiguous, // anything else: the measurement cannot tell
};
std::string_view decision_name(decision d);

inline constexpr double default_min_effect = 0.03;

decision decide(double ratio_lo, double ratio_hi, double min_effect = default_min_effect);

} // namespace kg
