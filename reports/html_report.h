// `kernelgate report`: one self-contained HTML page (inline CSS and SVG, no script, nothing
// fetched) of one or more result files, for a person to open or attach to a ticket instead of
// reading JSON. Each result gets its summary, its environment and the plots of its kind: a suite
// run's workload table and serving latency, a comparison's forest plot, fast_p's curve, an audit's
// kill matrix.
#pragma once

#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace kg {

// A result that cannot be shown (missing, malformed, an unknown kind, a baseline that is not a
// suite run): one line naming the file, the CLI's bad input.
struct report_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// `results`: result.json files or run folders holding one. `baseline`: a suite run each suite run
// of `results` is compared with (reports/run_compare.h decides; environments that differ are
// compared anyway and the differences listed). `history`: a run history database
// (reports/run_history.h) whose trends are drawn for each suite run's workloads. Throws
// report_error.
std::string html_report(const std::vector<std::filesystem::path>& results,
                        const std::optional<std::filesystem::path>& baseline,
                        const std::optional<std::filesystem::path>& history = std::nullopt);

} // namespace kg
