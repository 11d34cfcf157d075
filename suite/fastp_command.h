// `kernelgate fastp RESULT ...`: strict fast_p (KernelBench's rule) over intended and aligned
// task sets, with intervals, a noise-aware count and near-ties, from a kernelgate eval result or
// KernelBench's eval_results.json + baseline_time_torch.json.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace kg {

// The options of `kernelgate fastp` (help texts in suite/cli.cpp).
struct fastp_options {
  std::filesystem::path result;
  std::optional<std::filesystem::path> baseline, out, dataset;
  std::optional<int> level;
  std::vector<double> p = {0.0, 0.5, 0.8, 1.0, 1.5, 2.0}; // KernelBench's reported thresholds
  double min_effect = 0.03;
  std::optional<std::string> candidate;
  bool json = false;
};

// "0,0.5,1" -> {0, 0.5, 1}; throws std::invalid_argument naming the list when an entry is not a
// finite number >= 0.
std::vector<double> parse_p_list(const std::string& text);

int run_fastp_command(const fastp_options& o, const std::vector<std::string>& argv,
                      std::ostream& out, std::ostream& err);

} // namespace kg
