// What a workload run gives `kernelgate workload run` to print and record: metrics (intervals as
// {"estimate", "ci95"}) and gate verdicts.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stats/bootstrap.h"

namespace kg {

struct workload_gate {
  std::string name;
  bool pass = false;
  std::string detail;
};

struct workload_result {
  nlohmann::json metrics = nlohmann::json::object();
  std::vector<workload_gate> gates;
};

// {"estimate": b.estimate, "ci95": [b.lo, b.hi]}
nlohmann::json interval_json(const bootstrap_interval& b);

} // namespace kg
