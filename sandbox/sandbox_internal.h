// The sandbox's pieces that a second driver of the worker shares with evaluate_candidate: the
// trials a protocol runs, a trial as a manifest entry, reading a call's outputs back, and judging
// them (the fp64 oracle's rule or a peer's comparator). Used by sandbox.cpp and mutant_audit.cpp
// only; not part of the sandbox's public header.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sandbox/sandbox.h"

namespace kg::sandbox_detail {

struct labelled_trial {
  trial_key key;
  std::string label;
  std::string regime; // strict protocol: the input regime's name
  bool busy = false;  // run behind a blocking kernel (the stream looks busy, as when timed)
};

struct judgement {
  bool pass = true;
  std::string why; // the first failing output, in a sentence
  nlohmann::json comparisons = nlohmann::json::array(), worst;
};

// The correctness trials of a task under opt.peer (nullptr: kernelgate's strict draws).
std::vector<labelled_trial> correctness_trials(const task_def& task, const sandbox_options& opt);

// A trial as a worker manifest lists it: its input files, and where each output goes.
nlohmann::json trial_entry(const task_def& task, const trial_key& key, const trial_data& data,
                           const trial_files& files, const std::filesystem::path& out_prefix,
                           bool busy);

// The outputs a call wrote (nullopt: a file is missing or of the wrong size).
std::optional<std::vector<host_tensor>> read_outputs(const task_def& task, const trial_key& key,
                                                     const std::filesystem::path& out_prefix);
// The same into `outs`, reusing each tensor's buffer where its size already fits (the audit reads
// a candidate's outputs trial after trial); false when a file is missing or of the wrong size.
bool read_outputs_into(const task_def& task, const trial_key& key,
                       const std::filesystem::path& out_prefix, std::vector<host_tensor>& outs);

// One call's outputs against the protocol: the fp64 oracle within the task's (regime's)
// tolerance plus the condition term, or opt.peer's checker against `reference`.
// evidence = false: the verdict and its sentence only, without the worst element (a pass over
// the outputs that only the first disagreement of a check or a witness plan shows).
// statistics = false (the audit): the oracle checks stop at their first element outside and
// `comparisons` stays empty; the whole comparison runs only for a failure with evidence. The
// verdicts are the same (oracles/comparators.h, first_allclose_mismatch).
judgement judge(const task_def& task, const trial_key& key, const trial_data& data,
                const std::vector<host_tensor>& reference, const std::string& regime,
                const std::vector<host_tensor>& outs, const sandbox_options& opt,
                bool evidence = true, bool statistics = true);

// A peer compares with the LibTorch reference; without one, the oracle rounded to the output
// dtype stands in.
std::vector<host_tensor> peer_reference(const task_def& task, const trial_data& data);
// The same without a copy where the LibTorch reference ran (else the rounded oracle, built in
// `storage`): the audit asks for it for every peer trial of every candidate.
const std::vector<host_tensor>& peer_reference_view(const task_def& task, const trial_data& data,
                                                    std::vector<host_tensor>& storage);

// The worker's result file ({} when it is unreadable).
nlohmann::json read_worker_result(const std::filesystem::path& f);

// Runs a manifest in the worker holding the GPU gate: shared for correctness, exclusive for
// timing.
worker_outcome run_gated(worker_process& w, const sandbox_options& opt,
                         const std::filesystem::path& manifest, bool exclusive);

std::string one_line(std::string s);

} // namespace kg::sandbox_detail
