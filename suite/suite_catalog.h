// The regression suites of data/suites (workloads/suite_def.h) loaded with their schema's
// validation: load_suite takes the validator as a callback because the validator
// (reports/json_schema.h) sits above workloads/ in the layers.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "workloads/suite_def.h"

namespace kg {

// The suites folder: $KERNELGATE_SUITES_DIR when set and not empty, else the source tree's
// data/suites (KG_SUITES_DIR, fixed at build time).
std::filesystem::path default_suites_dir();

// A suite document against data/schema/suite.schema.json: one "POINTER: message" per violation
// ("/" for the root).
std::vector<std::string> validate_suite_document(const nlohmann::json& doc);

// load_suite with validate_suite_document on every file it reads (the suite and its base).
suite_def load_suite_validated(const std::string& name_or_file,
                               const std::filesystem::path& suites_dir = default_suites_dir());

} // namespace kg
