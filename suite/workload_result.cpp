#include "suite/workload_result.h"

namespace kg {

nlohmann::json interval_json(const bootstrap_interval& b) {
  return {{"estimate", b.estimate}, {"ci95", {b.lo, b.hi}}};
}

} // namespace kg
