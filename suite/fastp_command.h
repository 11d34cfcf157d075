// `kernelgate fastp RESULT [--baseline FILE] [--level N] [--p LIST] [--min-effect F]
//                  [--candidate NAME] [--json] [--out DIR]`: strict fast_p (KernelBench's rule)
// over intended and aligned task sets, with intervals, a noise-aware count and near-ties, from a
// kernelgate eval result or KernelBench's eval_results.json + baseline_time_torch.json.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace kg {
int run_fastp_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
} // namespace kg
