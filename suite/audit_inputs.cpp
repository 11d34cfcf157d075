#include "suite/audit_inputs.h"

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "suite/mutants_command.h"

namespace kg {

namespace fs = std::filesystem;

namespace {

// A witness file's status, as the kill matrix keeps it: a witness run's names as they are;
// `mutants equivalence`'s equivalent and compile_error taken, its other statuses not yet run.
witness_status status_from(const std::string& name) {
  if (name == "differs" || name == "host_code") return witness_status::not_run;
  return witness_status_from_name(name); // throws for anything else
}

std::string read_statuses(const std::string& file, std::map<std::string, witness_status>& status) {
  std::ifstream in(file);
  if (!in) return "cannot read --witnesses '" + file + "'";
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    try {
      const auto j = nlohmann::json::parse(line);
      status[j.at("id").get<std::string>()] = status_from(j.at("status").get<std::string>());
    } catch (const std::exception& e) {
      return "--witnesses line " + std::to_string(n) + ": " + e.what();
    }
  }
  return "";
}

} // namespace

std::string read_audit_inputs(const audit_checker_options& o, audit_inputs& in) {
  in.root = o.root.empty() ? default_source_root() : fs::path(o.root);
  in.tasks_dir = o.tasks_dir.empty() ? in.root / "data" / "tasks" : fs::path(o.tasks_dir);
  // The catalog, filtered by task (every id kept, to check the witness file against).
  std::set<std::string> every_id;
  try {
    const auto task_filter = task_regex(o.tasks);
    for (auto& m : read_mutant_catalog(o.catalog)) {
      every_id.insert(m.id);
      if (std::regex_match(m.task, task_filter)) in.mutants.push_back(std::move(m));
    }
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  if (!o.witnesses.empty())
    if (auto why = read_statuses(o.witnesses, in.status); !why.empty()) return why;
  // An id the whole catalog lacks says the files do not belong together; ids of filtered-out
  // tasks are simply not used.
  // A protocol audit's witnesses.jsonl also has a line per control ("control:<path>"): not a
  // mutant, and the controls are sent anyway.
  std::erase_if(in.status, [](const auto& e) { return e.first.rfind("control:", 0) == 0; });
  for (const auto& [id, s] : in.status)
    if (!every_id.count(id)) return "--witnesses names mutant " + id + ", which the catalog lacks";
  for (const auto& m : in.mutants) {
    if (in.sources.count(m.path)) continue;
    std::ifstream f(in.root / m.path, std::ios::binary);
    if (!f) return "cannot read '" + (in.root / m.path).string() + "'";
    std::ostringstream s;
    s << f.rdbuf();
    in.sources[m.path] = s.str();
    in.task_of_path[m.path] = m.task;
  }
  for (const auto& [path, task] : in.task_of_path) {
    const auto f = in.tasks_dir / (task + ".json");
    if (!fs::is_regular_file(f)) return "task '" + task + "' has no task file " + f.string();
    in.task_file[task] = f;
  }
  return "";
}

} // namespace kg
