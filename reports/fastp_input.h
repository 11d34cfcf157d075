// What the fastp readers hand to the scorer: per candidate, the intended task set as task
// outcomes, plus a description of the inputs (paths, hashes, which sample was scored) that goes
// into the printed header and the result's config.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/fast_p.h"

namespace kg {

// A file cannot be scored as given: a bad-input error (exit code 2). The message names the file
// and the problem, on one line.
struct fastp_input_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct scored_candidate {
  std::string name;                // the candidate's name; empty for a KernelBench run
  std::vector<task_outcome> tasks; // the intended set, in a stable order
};

struct fastp_source {
  nlohmann::json description;     // format, files with sha256, level, sample, ...
  std::vector<std::string> notes; // facts about the inputs worth printing (e.g. 0 aligned)
  std::string no_interval_reason; // non-empty: the format never carries speedup intervals
  std::vector<scored_candidate> candidates;
};

// The file's bytes (for hashing) and its parsed JSON; fastp_input_error naming `path` when it
// cannot be read or is not JSON.
struct json_file {
  std::filesystem::path path;
  std::string bytes;
  nlohmann::json doc;
};
json_file read_json_file(const std::filesystem::path& path);

// {"path": ..., "sha256": ...} for the description.
nlohmann::json file_identity(const json_file& f);

} // namespace kg
