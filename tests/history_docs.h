// Hand-made result documents for the run history's tests: suite runs whose medians and gates
// are known by construction.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/result_writer.h"

namespace kg::test {

using nlohmann::json;

// Samples with a known median: `median` itself, 2% either side, 1% either side.
inline std::vector<double> around(double median) {
  return {median * 0.98, median * 0.99, median, median, median, median * 1.01, median * 1.02};
}

inline json workload(const std::string& id, const std::vector<double>& samples,
                     const std::string& direction = "lower", bool gate_pass = true) {
  std::vector<double> sorted = samples;
  std::sort(sorted.begin(), sorted.end());
  return {{"type", "suite_workload"},
          {"id", id},
          {"metric",
           {{"name", direction == "lower" ? "kernel_seconds" : "tokens_per_second"},
            {"direction", direction},
            {"unit", direction == "lower" ? "s" : "tokens/s"}}},
          {"samples", samples},
          {"estimate", sorted[sorted.size() / 2]},
          {"ci95", {sorted.front(), sorted.back()}},
          {"gates", {{{"name", "oracle_fp64"}, {"pass", gate_pass}, {"detail", ""}}}}};
}

inline json suite_run(const std::string& suite, const std::string& created,
                      const std::string& revision, bool dirty, std::vector<json> records) {
  bool pass = true;
  for (const auto& r : records)
    pass = pass && r["gates"][0]["pass"].get<bool>();
  return {
      {"schema", result_schema_id},
      {"kind", "suite_run"},
      {"created", created},
      {"finished", created},
      {"argv", {"kernelgate", "run", "--suite", suite}},
      {"environment",
       {{"gpu", {{"name", "NVIDIA H200"}}}, {"git", {{"revision", revision}, {"dirty", dirty}}}}},
      {"config", {{"suite", suite}, {"clock_policy", "observe"}}},
      {"records", std::move(records)},
      {"summary", {{"status", "complete"}, {"gates_passed", pass}}}};
}

} // namespace kg::test
