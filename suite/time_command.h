// `kernelgate time`: measure a kernel the project holds, optionally against another one.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace kg {

// The options of `kernelgate time` (help texts in suite/cli.cpp).
struct time_options {
  std::string impl, vs;           // implementations (timed_implementation_names); vs optional
  std::string clocks = "observe"; // observe | require-locked | lock=<MHz>
  std::string backend = "auto";   // auto | events | graph | cupti | counters
  std::string shape = "8192x4096";
  std::string dtype = "float16"; // float32 | float16
  double min_effect = 0.03;      // a fraction in [0, 1)
  std::string out;               // "": kg-out/time-<impl>
  bool no_progress = false;      // plain lines even on a terminal
};

int run_time_command(const time_options& o, const std::vector<std::string>& argv, std::ostream& out,
                     std::ostream& err);
std::vector<std::string> timed_implementation_names();

} // namespace kg
