// What sharing the GPU costs, from one suite run: each workload that ran beside something (its
// placement parameter not "solo") against its solo twin in the same run, as a fraction of solo
// with a bootstrap interval. `kernelgate run` and `kernelgate merge` put the list in the run's
// summary (`colocation`) and print it; a before/after claim compares two runs' lists.
//
// The twin is found from the records alone: the same kind, the same metric and the same params
// but the placement key ("placement" or "tenant", whichever the params hold) set to "solo". The
// fraction is performance beside others over performance solo, so below 1 is a slowdown for
// either direction of metric: mean(co) / mean(solo) for a "higher" metric (tokens/s), mean(solo) /
// mean(co) for a "lower" one (seconds, p99 ms). Means, not medians: a serving workload has a few
// repeated traces and every one counts (decode-colocated-training's fraction_of_solo is defined
// the same way). The interval resamples each side's samples on its own (BCa, 95%).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stats/bootstrap.h"

namespace kg {

// The params keys that say where a workload ran; "solo" is alone on the whole GPU.
inline constexpr const char* placement_keys[] = {"placement", "tenant"};

struct colocation_pair {
  std::string id, solo_id;
  std::string placement_key, placement; // e.g. "tenant", "lora16"
  std::string metric, unit, direction;
  double mean = 0, solo_mean = 0; // of each side's samples, in the metric's unit
  std::size_t samples = 0, solo_samples = 0;
  double fraction = 0; // performance beside others / performance solo
  // The 95% interval; none where a side has a single sample (there is nothing to resample).
  std::optional<bootstrap_interval> interval;
};

// A workload beside others that has no fraction, and why (no solo twin in the run, the twin or
// the workload has no samples, a metric that is not positive, ...).
struct colocation_gap {
  std::string id, reason;
};

struct colocation_report {
  std::vector<colocation_pair> pairs; // in the order of the records
  std::vector<colocation_gap> gaps;
};

// Records of kind "suite_workload" (others are skipped); never throws on a malformed record:
// what it cannot use is a gap with its reason.
colocation_report colocation_fractions(const std::vector<nlohmann::json>& records);

// {"pairs": [{id, solo_id, placement_key, placement, metric, unit, direction, fraction, ci95
// ([lo, hi] or null), mean, solo_mean, samples, solo_samples}], "gaps": [{id, reason}],
// "definition": "..."}.
nlohmann::json to_json(const colocation_report& r);

// The printed form: a heading, then one line a pair ("  0.612 [0.551, 0.684]  ID  (tokens/s,
// beside lora16)") and one a gap; "" when the run has neither.
std::string colocation_text(const colocation_report& r);

// Two runs' fractions side by side (`kernelgate compare`): a heading, then a line a workload with
// a fraction in either run ("  ID (tokens/s, tenant lora16): 0.612 [0.551, 0.684] -> 0.650 [...]",
// "-" on a side without one); "" when neither run has any.
std::string colocation_change_text(const colocation_report& base, const colocation_report& next);

} // namespace kg
