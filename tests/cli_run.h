// The CLI tests' way to call kernelgate in-process: argv without "kernelgate", captured output.
#pragma once

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "suite/cli.h"

namespace kg::test {

struct run_result {
  int rc;
  std::string out, err;
};

inline run_result run(std::vector<std::string> args) {
  args.insert(args.begin(), "kernelgate");
  std::ostringstream out, err;
  const int rc = kernelgate_main(args, out, err);
  return {rc, out.str(), err.str()};
}

inline int lines(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

} // namespace kg::test
