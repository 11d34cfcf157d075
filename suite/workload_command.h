// `kernelgate workload list | run ID ...`: the workloads of the Qwen3-4B stack, each run printing
// its metrics with intervals and its gate verdicts and writing a `workload` result.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "suite/decode_workload.h"

namespace kg {

// The options of `kernelgate workload run` (help texts in suite/cli.cpp).
struct workload_options {
  std::string id;
  std::string device = "cpu"; // cpu | cuda
  int steps = 5;
  int jobs = 0;
  std::string out = "kg-out/workload";
  // The decode workloads' own options; `decode_options_given` names those on the command line
  // (refused for the other workloads, not ignored).
  double start_rps = 2, trace_seconds = 6, itl_limit_ms = 50;
  int max_load_steps = decode_workload_options{}.max_load_steps;
  int repeats = decode_workload_options{}.repeats;
  std::vector<std::string> decode_options_given;
};

// One line per workload: id, [GPU] when it needs one, what it runs.
void print_workload_list(std::ostream& out);
int run_workload_command(const workload_options& o, const std::vector<std::string>& argv,
                         std::ostream& out, std::ostream& err);

} // namespace kg
