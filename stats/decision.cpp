#include "stats/decision.h"

#include <stdexcept>

namespace kg {

std::string_view decision_name(decision d) {
  switch (d) {
  case decision::faster:
    return "FASTER";
  case decision::slower:
    return "SLOWER";
  case decision::same:
    return "SAME";
  case decision::ambiguous:
    return "AMBIGUOUS";
  }
  return "UNKNOWN";
}

decision decide(double lo, double hi, double min_effect) {
  if (!(lo <= hi)) throw std::invalid_argument("decision needs lo <= hi");
  if (!(min_effect >= 0 && min_effect < 1)) throw std::invalid_argument("min effect in [0, 1)");
  // A time ratio of 1 - e is a speedup of at least 1 / (1 - e) > 1 + e: the asymmetry is
  // deliberate; a claim of "faster" needs the stricter side.
  if (hi < 1.0 - min_effect) return decision::faster;
  if (lo > 1.0 + min_effect) return decision::slower;
  if (lo >= 1.0 - min_effect && hi <= 1.0 + min_effect) return decision::same;
  return decision::ambiguous;
}

} // namespace kg
