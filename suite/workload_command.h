// `kernelgate workload list | run ID ...`: the workloads of the Qwen3-4B stack, each run printing
// its metrics with intervals and its gate verdicts and writing a `workload` result.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace kg {
int run_workload_command(const std::vector<std::string>& args, std::ostream& out,
                         std::ostream& err);
} // namespace kg
