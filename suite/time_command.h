// `kernelgate time`: measure a kernel the project holds, optionally against another one.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace kg {
int run_time_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
std::vector<std::string> timed_implementation_names();
} // namespace kg
