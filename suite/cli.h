// The kernelgate command line, callable in-process (tests drive it with argument vectors).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace kg {
int kernelgate_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
}
