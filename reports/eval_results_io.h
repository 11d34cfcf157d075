// kernelgate's own evaluation results: a result envelope (docs/result-schema.md) with
// "kind": "eval", config.intended_tasks (task ids) and records of "type": "evaluation":
//   {task, candidate, status (PASSED, INCORRECT_SHAPE, INCORRECT_NUMERICAL, INCORRECT_DTYPE,
//    RUNTIME_ERROR, COMPILE_ERROR, TIMEOUT, REWARD_HACK, INVALID_REFERENCE, MISSING),
//    status_reason, candidate_us (PASSED and timed only), baseline_us (LibTorch reference; absent
//    when there is none), speedup = baseline_us / candidate_us, speedup_ci95 [lo, hi] (optional)}
// Each candidate is scored on its own over the intended tasks:
//   - no record, or status MISSING: missing (not fast; listed as missing, never as a failure).
//     It stays in the aligned denominator: whether it has a baseline is unknown, and dropping it
//     would reward not running it.
//   - INVALID_REFERENCE: the candidate was not judged; excluded from aligned with its reason.
//   - any other status without baseline_us: excluded from aligned ("no baseline_us").
#pragma once

#include <optional>
#include <string>

#include "reports/fastp_input.h"

namespace kg {

// `candidate`: score only that candidate (fastp_input_error when the file has no such one);
// nullopt: every candidate, in order of first appearance.
fastp_source eval_results_source(const json_file& result,
                                 const std::optional<std::string>& candidate);

} // namespace kg
