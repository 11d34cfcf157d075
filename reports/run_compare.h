// Comparing two suite runs (`kernelgate compare BASE NEW`): workloads paired by id, a noise-aware
// decision per workload from a bootstrap interval of the ratio of the two runs' samples, gate
// changes, workloads missing on either side, and the environment check that refuses runs which
// cannot be compared. Everything is computed as data (one struct per workload) so that the command
// only prints it and tests assert on it without parsing text.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "stats/decision.h"

namespace kg {

// A run that cannot be compared (unreadable, malformed, not a suite run, unfinished, or from a
// different environment): one line, the CLI's bad input (exit 2).
struct compare_input_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One side of a comparison: a `kernelgate run` result (kind "suite_run").
struct suite_run_result {
  std::string label;          // "BASE" or "NEW", as messages name it
  std::filesystem::path file; // its result.json
  std::string sha256;         // of the file's bytes: the comparison names exactly what it read
  nlohmann::json created, environment, config, summary;
  std::vector<nlohmann::json> records; // the "suite_workload" records, checked for shape
};

// Reads a result.json, or a folder holding one. A folder with records.jsonl but no result.json is
// a run that did not finish; it is refused (its environment and configuration are only in the
// envelope written at the end), as is anything that is not a well-formed suite_run result or that
// names one workload id twice. Throws compare_input_error.
suite_run_result load_suite_run(const std::filesystem::path& folder_or_file,
                                const std::string& label);
// The same checks on a document already in memory (a run rebuilt from the history database);
// `file` names it in messages.
suite_run_result suite_run_from_document(const nlohmann::json& doc,
                                         const std::filesystem::path& file,
                                         const std::string& label);

struct environment_difference {
  std::string field;         // "environment.gpu.name", "config.clock_policy", ...
  nlohmann::json base, next; // the two values (null where the field is absent)
};

// The fields that decide whether two runs' times are comparable: GPU model, driver (NVML and
// CUDA), clock policy, whether clocks were locked and, when both were, the locked SM clock. A
// field missing or "unavailable" on both sides counts as equal.
std::vector<environment_difference> environment_differences(const suite_run_result& base,
                                                            const suite_run_result& next);

struct compare_options {
  double min_effect = default_min_effect;
  bool allow_env_change = false;
  // Bootstrap of each workload's ratio. Each workload's resampling seed is `seed` mixed with its
  // id, so the same two runs always give the same decisions.
  int resamples = 10000;
  std::uint64_t seed = 0x6b67'636d'7072ull; // "kgcmpr"
};

enum class compare_status {
  faster,
  slower,
  same,
  ambiguous,
  no_data,      // fewer than 2 usable samples, or an error record, on a side
  incomparable, // metric name, unit or direction differ between the sides
  missing,      // the id is in one run only
};
std::string_view compare_status_name(compare_status s); // "FASTER", ..., "NO_DATA", "MISSING"

// A ratio oriented like a time: NEW / BASE for a metric whose direction is "lower", BASE / NEW for
// "higher", so above 1 is always worse. The interval is the BCa bootstrap of the ratio of medians
// of the two independent samples, or, when both records name the same `sample_keys` (each sample
// measured on a named input: serving's arrival seeds), the percentile bootstrap of the median of
// the per-key ratios (paired): the inputs' own spread, which dwarfs run-to-run noise on a trace
// replayed from its seed, then cancels.
struct ratio_decision {
  double ratio = 0, lo = 0, hi = 0;
  decision verdict = decision::ambiguous;
  bool paired = false; // by sample key
};
ratio_decision decide_ratio(std::span<const double> base, std::span<const double> next,
                            const std::string& direction, const std::string& id,
                            const compare_options& opt);
// base[i] and next[i] measured on the same input.
ratio_decision decide_paired_ratio(std::span<const double> base, std::span<const double> next,
                                   const std::string& direction, const std::string& id,
                                   const compare_options& opt);

struct gate_change {
  std::string name;
  std::optional<bool> base_pass, new_pass; // nullopt: the gate is absent on that side
};

struct side_summary {
  std::size_t samples = 0;
  std::optional<double> median;
  std::optional<std::string> error; // the record's error, when it has one
  // The SM clock the workload ran at (MHz): the clock watch's median (extra.gpu_clocks), or the
  // kernel timer's modal clock (extra.timing.modal_sm_mhz); none when the record has neither.
  std::optional<double> sm_mhz;
};

// Two runs whose SM clocks differ by more than this during a workload: `compare` lists the
// workload with both clocks beside its decision (a run-level clock shift moves every sample of a
// run alike, which the samples alone cannot tell from a regression). The decision is kept: a
// change in the code can move the clock too.
inline constexpr double clock_shift_threshold = 0.02;

struct workload_comparison {
  std::string id;
  nlohmann::json metric; // {"name", "direction", "unit"} of NEW (of BASE when only there)
  compare_status status = compare_status::no_data;
  std::string why; // for no_data, incomparable and missing: the reason, one line
  std::optional<side_summary> base, next;
  std::optional<ratio_decision> ratio;
  std::vector<gate_change> gate_changes;
  std::vector<std::string> failing_gates_new; // the gates that fail in NEW
  std::string missing_from;                   // "BASE" or "NEW" when status is missing
  // NEW's SM clock over BASE's, minus 1, when both sides have one.
  std::optional<double> clock_shift() const;
};

struct run_comparison {
  std::vector<workload_comparison> workloads; // every id of either run, ordered by id
  std::vector<std::string> only_in_base, only_in_new;
  std::vector<environment_difference> environment_differences; // non-empty only when allowed
  compare_options options;

  std::size_t count(compare_status s) const;
  std::size_t paired() const; // ids present in both runs
  std::size_t gate_change_count() const;
  std::size_t clock_shift_count() const; // paired workloads past clock_shift_threshold
  std::size_t workloads_failing_gates_new() const;
  // Exit 1: a workload SLOWER beyond the minimum effect, or a gate failing in NEW.
  bool fails() const;
};

// Compares two loaded runs. Throws compare_input_error naming every differing environment field
// (both values) unless opt.allow_env_change, in which case the differences are kept in the
// result.
run_comparison compare_runs(const suite_run_result& base, const suite_run_result& next,
                            const compare_options& opt);

// "compare: 160 paired: 2 SLOWER, 1 FASTER, 150 SAME, 7 AMBIGUOUS; 0 missing; 0 gate changes ->
// PASS": the line a person reads at a glance.
std::string compare_summary_line(const run_comparison& c);

// The result file's pieces (kind "compare"): one record per workload id, the configuration that
// reproduces the comparison, and the summary.
nlohmann::json compare_record(const workload_comparison& w);
nlohmann::json compare_config(const suite_run_result& base, const suite_run_result& next,
                              const compare_options& opt);
nlohmann::json compare_summary(const run_comparison& c);
nlohmann::json environment_difference_json(const environment_difference& d);

} // namespace kg
