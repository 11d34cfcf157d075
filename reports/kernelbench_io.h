// KernelBench's own result files, read with its scoring semantics (KernelBench @ 423217d9:
// src/score.py and scripts/benchmark_eval_analysis.py; docs/result-schema.md, fast_p results):
//   eval_results.json          {"<problem_id>": [{sample_id, compiled, correctness, metadata,
//                               runtime (ms, -1.0 when absent), runtime_stats}, ...]}
//   baseline_time_torch.json   {"level1": {"<id>_<Name>.py": {mean (ms), std, min, max,
//                               num_trials, hardware, device}}, ...}
// Only sample_id 0 is scored (KernelBench's analysis does the same). Intended = every problem in
// eval_results or in the baseline level; a problem with no sample 0 is missing (KernelBench patches
// it in as a failure). Aligned = problems with a baseline entry, matched by the numeric prefix of
// the baseline file name; the rest are excluded with the reason. KernelBench's fast_p is the
// fraction over the aligned set.
#pragma once

#include <filesystem>
#include <optional>

#include "reports/fastp_input.h"

namespace kg {

inline constexpr int kernelbench_scored_sample = 0;

// `dataset`: KernelBench's folder of the level's problem files (`<id>_<Name>.py`). With it the
// problems are exactly those files (KernelBench's intended set: problems evaluated but no longer
// in the dataset, and stale baseline entries, are ignored) and a baseline entry counts only under
// the problem's whole file name, as KernelBench's analysis matches (a problem renamed since the
// baseline was timed is excluded). Without it, every id in either file, matched by '<id>_'.
// Throws fastp_input_error naming the file and the field on any malformed input.
fastp_source kernelbench_source(const json_file& eval_results, const json_file& baseline, int level,
                                const std::optional<std::filesystem::path>& dataset = std::nullopt);

} // namespace kg
