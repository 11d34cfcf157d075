// kernelgate's own evaluation results: a result envelope (docs/result-schema.md) with
// "kind": "eval", config.intended_tasks (task ids) and records of "type": "evaluation":
//   {task, candidate, status (PASSED, INCORRECT_SHAPE, INCORRECT_NUMERICAL, INCORRECT_DTYPE,
//    RUNTIME_ERROR, COMPILE_ERROR, TIMEOUT, REWARD_HACK, NONDETERMINISTIC, INVALID_REFERENCE,
//    MISSING),
//    status_reason, candidate_us (PASSED and timed only), baseline_us (reference time; absent
//    when there is none), speedup (baseline over candidate time; kernelgate eval writes its
//    ABBA-paired estimate), speedup_ci95 [lo, hi] (optional, the interval of speedup)}
// The speedup scored is the record's speedup when present (speedup_ci95 belongs to it), else
// baseline_us / candidate_us. A MISSING record with an empty candidate says the task has no
// candidate at all; it is the missing reason of that task for every candidate.
// Each candidate is scored on its own over the intended tasks:
//   - no record, or status MISSING: missing (not fast; listed as missing, never as a failure).
//     It stays in the aligned denominator: whether it has a baseline is unknown, and dropping it
//     would reward not running it.
//   - INVALID_REFERENCE: the candidate was not judged; excluded from aligned with its reason.
//   - any other status with neither baseline_us nor speedup: excluded from aligned
//     ("no baseline_us").
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
