// Loads task files (data/tasks/*.json), validates them against data/schema/task.schema.json
// (embedded) and then for what a schema cannot say: every dimension symbol defined by every
// shape, a tolerance for every floating output dtype, at least one shape with an odd dimension
// (a tile tail), flops and bytes computable. A bad file is a task_error whose message names the
// file and the field: "data/tasks/x.json: /inputs/1/dtype: ...".
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "workloads/task.h"

namespace kg {

struct task_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string_view task_schema_text();

task_def load_task(const std::filesystem::path& file);
// Files matching a glob (a file, a directory = all its *.json, or a pattern with * and ?), sorted
// by id. Throws task_error when nothing matches or any file is bad.
std::vector<task_def> load_tasks(const std::string& glob);
// The paths a glob names (sorted); exposed for tests.
std::vector<std::filesystem::path> expand_glob(const std::string& glob);

} // namespace kg
