// `kernelgate eval`: every (task, candidate) pair -- compile (parallel, cached), sandboxed run,
// correctness against the fp64 oracle -- streamed as `evaluation` records.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace kg {
int run_eval_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
} // namespace kg
