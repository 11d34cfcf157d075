// Expected outcome of the LayerNorm affine ablation, transcribed from
// docs/architecture.md, The LayerNorm affine ablation (accepted of 18 per cell), and the preset table
// derived by hand: presets whose norm parameters are the identity (kernelbench, kernelbench-v0,
// kbv, sol) cannot tell any altered formula from the correct one; presets that vary them
// (flashinfer, strict) reject all six.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kg::testing {

inline const std::vector<std::string> regimes = {"identity", "weight_only", "bias_only", "both"};

inline const std::map<std::string, std::vector<int>> expected_grid = {
    {"omit all affine", {18, 0, 0, 0}},
    {"omit weight", {18, 0, 18, 0}},
    {"omit bias", {18, 18, 0, 0}},
    {"scalar affine", {18, 0, 0, 0}},
    {"apply affine twice", {18, 0, 0, 0}},
    {"affine before normalization", {18, 0, 0, 0}},
    {"control: copied reference", {18, 18, 18, 18}},
};

inline const std::vector<std::string> identity_presets = {"kernelbench", "kernelbench-v0", "kbv",
                                                          "sol"};
inline const std::vector<std::string> varying_presets = {"flashinfer", "strict"};

// Asserts a result.json summary against the expectations; returns failures as text.
inline std::vector<std::string> check_layernorm_summary(const nlohmann::json& s) {
  std::vector<std::string> bad;
  auto expect = [&](bool ok, const std::string& what) {
    if (!ok) bad.push_back(what);
  };
  for (const auto& [row, counts] : expected_grid)
    for (std::size_t c = 0; c < regimes.size(); ++c) {
      const auto& cell = s["matrix"][row][regimes[c]];
      expect(cell["accepted"] == counts[c] && cell["planned"] == 18 && cell["errors"] == 0 &&
                 cell["missing"] == 0,
             row + "/" + regimes[c] + ": " + cell.dump());
    }
  expect(s["totals"]["accepted"] == 216, "accepted " + s["totals"].dump());
  expect(s["totals"]["rejected"] == 288, "rejected " + s["totals"].dump());
  expect(s["totals"]["errors"] == 0 && s["totals"]["missing"] == 0, "errors " + s["totals"].dump());
  expect(s["controls"]["accepted"] == 72 && s["controls"]["planned"] == 72,
         "controls " + s["controls"].dump());
  for (const auto& row : {"control: independent LayerNorm", "control: fp64 oracle (cast)"})
    for (const auto& r : regimes)
      expect(s["extra_controls"][row][r]["accepted"] == 18, std::string(row) + "/" + r);
  for (const auto& [row, counts] : expected_grid) {
    const bool control = row.rfind("control", 0) == 0;
    for (const auto& p : identity_presets)
      expect(s["presets"][row][p]["accepted"] == 18, "preset " + p + " " + row);
    for (const auto& p : varying_presets)
      expect(s["presets"][row][p]["accepted"] == (control ? 18 : 0) &&
                 s["presets"][row][p]["errors"] == 0,
             "preset " + p + " " + row + ": " + s["presets"][row][p].dump());
  }
  for (const auto& row : {"control: independent LayerNorm", "control: fp64 oracle (cast)"})
    for (const auto& p : {"kernelbench", "kernelbench-v0", "kbv", "sol", "flashinfer", "strict"})
      expect(s["presets"][row][p]["accepted"] == 18, std::string("preset ") + p + " " + row);
  return bad;
}

} // namespace kg::testing
