#include "stats/decision.h"

#include <stdexcept>

#include "base/name_table.h"

namespace kg {

namespace {

constexpr name_table<decision, 4> decision_names{{{decision::faster, "FASTER"},
                                                  {decision::slower, "SLOWER"},
                                                  {decision::same, "SAME"},
                                                  {decision::ambiguous, "AMBIGUOUS"}}};

} // namespace

std::string_view decision_name(decision d) {
  return name_of(decision_names, d, "UNKNOWN");
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
