#include "suite/mutants_command.h"

#include <fnmatch.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <ostream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "base/printable.h"
#include "base/sha256.h"
#include "mutants/mutant_catalog.h"
#include "mutants/mutation_rules.h"
#include "reports/result_writer.h"
#include "suite/exit_codes.h"
#include "suite/progress_meter.h"

namespace kg {
namespace fs = std::filesystem;

fs::path default_source_root() {
  if (const char* dir = std::getenv("KERNELGATE_SOURCE_DIR"); dir && *dir) return dir;
  return KG_SOURCE_ROOT;
}

std::vector<std::string> default_kernel_globs() {
  return {"kernels/tasks/*.cu", "kernels/variants/**/*.cu"};
}

namespace {

bool wildcard(const std::string& s) {
  return s.find_first_of("*?[") != std::string::npos;
}

std::vector<std::string> split_path(const std::string& s) {
  std::vector<std::string> parts;
  std::string part;
  for (char c : s + "/") {
    if (c != '/') {
      part += c;
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
      part.clear();
    } else {
      part.clear();
    }
  }
  return parts;
}

// The entries of a folder, sorted (an unreadable folder has none).
std::vector<fs::path> entries(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    out.push_back(it->path());
  std::sort(out.begin(), out.end());
  return out;
}

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(fs::symlink_status(p, ec));
}

void walk(const fs::path& dir, const std::vector<std::string>& parts, std::size_t k,
          std::vector<fs::path>& found) {
  if (k == parts.size()) return;
  const std::string& part = parts[k];
  const bool last = k + 1 == parts.size();
  if (part == "**") {
    walk(dir, parts, k + 1, found); // no folder
    for (const auto& e : entries(dir))
      if (is_dir(e) && e.filename().string()[0] != '.') walk(e, parts, k, found);
    return;
  }
  if (!wildcard(part)) {
    const fs::path p = dir / part;
    std::error_code ec;
    if (last ? fs::exists(fs::symlink_status(p, ec)) && !is_dir(p) : is_dir(p)) {
      if (last)
        found.push_back(p);
      else
        walk(p, parts, k + 1, found);
    }
    return;
  }
  for (const auto& e : entries(dir)) {
    const std::string name = e.filename().string();
    if (::fnmatch(part.c_str(), name.c_str(), FNM_PERIOD) != 0) continue;
    if (last && !is_dir(e))
      found.push_back(e);
    else if (!last && is_dir(e))
      walk(e, parts, k + 1, found);
  }
}

// Every .cu below a folder.
void every_cu(const fs::path& dir, std::vector<fs::path>& found) {
  for (const auto& e : entries(dir)) {
    if (is_dir(e)) {
      if (e.filename().string()[0] != '.') every_cu(e, found);
    } else if (e.extension() == ".cu") {
      found.push_back(e);
    }
  }
}

std::string task_of(const fs::path& file, const fs::path& base) {
  const auto rel = file.lexically_relative(base);
  auto it = rel.begin();
  if (rel.empty() || it == rel.end() || std::next(it) == rel.end() || it->string() == "..")
    return file.stem().string();
  return it->string();
}

int bad_input(std::ostream& err, const std::string& why) {
  err << "kernelgate: mutants generate: " << printable(why, 600) << "\n";
  return exit_code::bad_input;
}

std::string read_text(const fs::path& p, bool& ok) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  std::error_code ec;
  ok = in.is_open() && !in.bad() && !fs::is_directory(p, ec);
  return s.str();
}

} // namespace

std::vector<kernel_file> expand_kernel_glob(const std::string& glob, const fs::path& root) {
  const fs::path pattern = fs::path(glob).is_absolute() ? fs::path(glob) : root / glob;
  std::vector<fs::path> found;
  fs::path base;
  if (!wildcard(glob)) {
    std::error_code ec;
    if (fs::is_directory(pattern, ec)) {
      base = pattern;
      every_cu(pattern, found);
    } else {
      if (fs::exists(fs::symlink_status(pattern, ec))) found.push_back(pattern);
      base = pattern.parent_path();
      // kernels/variants/TASK/NAME.cu named alone still belongs to TASK.
      if (base.parent_path().filename() == "variants") base = base.parent_path();
    }
  } else {
    const auto parts = split_path(pattern.relative_path().generic_string());
    std::size_t fixed = 0;
    base = pattern.root_path();
    while (fixed + 1 < parts.size() && !wildcard(parts[fixed]) && parts[fixed] != "**")
      base /= parts[fixed++];
    walk(base, parts, fixed, found);
  }
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  std::vector<kernel_file> out;
  for (const auto& f : found)
    out.push_back({f, task_of(f, base)});
  return out;
}

std::vector<mutant> read_mutant_catalog(const fs::path& folder) {
  const auto file = folder / "catalog.jsonl";
  std::ifstream in(file);
  if (!in) throw std::invalid_argument("cannot read '" + file.string() + "'");
  std::vector<mutant> all;
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    try {
      all.push_back(mutant_from_json(nlohmann::json::parse(line)));
    } catch (const std::exception& e) {
      throw std::invalid_argument(file.string() + " line " + std::to_string(n) + ": " + e.what());
    }
  }
  return all;
}

std::regex task_regex(const std::string& text) {
  try {
    return std::regex(text.empty() ? ".*" : text);
  } catch (const std::regex_error& e) {
    throw std::invalid_argument("--tasks '" + text + "' is not a regular expression: " + e.what());
  }
}

int run_mutants_generate_command(const mutants_options& o, std::ostream& out, std::ostream& err) {
  const fs::path root = o.root.empty() ? default_source_root() : fs::path(o.root);
  if (!fs::is_directory(root))
    return bad_input(err, "--root '" + root.string() + "' is not a folder");
  if (o.out.empty()) return bad_input(err, "--out is empty");
  const fs::path dir = o.out;
  {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir))
      return bad_input(err, "cannot create output folder '" + dir.string() + "'" +
                                (ec ? ": " + ec.message() : ": not a folder"));
  }

  // The files, each once (the first glob that names it gives its task), sorted by path.
  struct source {
    std::string path, task;
    fs::path file;
  };
  std::map<std::string, source> files;
  const auto globs = o.kernels.empty() ? default_kernel_globs() : o.kernels;
  for (const auto& g : globs) {
    const auto found = expand_kernel_glob(g, root);
    if (found.empty())
      return bad_input(err, "--kernels '" + g + "': no file matches (under " + root.string() + ")");
    for (const auto& k : found) {
      const auto rel = k.file.lexically_relative(root);
      const std::string path = !rel.empty() && rel.begin()->string() != ".."
                                   ? rel.generic_string()
                                   : k.file.lexically_normal().generic_string();
      files.emplace(path, source{path, k.task, k.file});
    }
  }

  std::vector<mutant> all;
  nlohmann::json file_list = nlohmann::json::array();
  std::map<std::string, int> by_family, by_rule, by_task;
  progress_meter meter(out, progress_bar_wanted(out, o.no_progress), files.size());
  for (const auto& [path, s] : files) {
    meter.start(path);
    bool ok = false;
    const std::string text = read_text(s.file, ok);
    if (!ok) return bad_input(err, "cannot read '" + s.file.string() + "'");
    auto ms = generate_mutants(text, path, s.task);
    file_list.push_back({{"path", path},
                         {"task", s.task},
                         {"sha256", sha256_hex(text)},
                         {"bytes", text.size()},
                         {"mutants", ms.size()}});
    by_task[s.task] += static_cast<int>(ms.size());
    meter.done(path + "  " + std::to_string(ms.size()) + " mutants");
    for (auto& m : ms) {
      ++by_family[m.family];
      ++by_rule[m.rule];
      all.push_back(std::move(m));
    }
  }
  meter.finish();
  std::set<std::string> ids;
  for (const auto& m : all)
    if (!ids.insert(m.id).second)
      throw std::logic_error("mutant id " + m.id + " repeats across files (" + m.path + ")");

  std::string catalog;
  for (const auto& m : all)
    catalog += to_json(m).dump() + "\n";
  nlohmann::json families = nlohmann::json::object(), rules = nlohmann::json::object(),
                 tasks = nlohmann::json::object();
  int families_present = 0;
  for (const auto& f : mutant_families()) {
    families[f] = by_family[f];
    families_present += by_family[f] > 0;
  }
  for (const auto& r : mutation_rules())
    rules[std::string(r.name)] = by_rule[std::string(r.name)];
  for (const auto& [t, n] : by_task)
    tasks[t] = n;
  const nlohmann::json summary = {{"schema", "kernelgate.mutants.summary/1"},
                                  {"mutants", all.size()},
                                  {"families", families},
                                  {"rules", rules},
                                  {"tasks", tasks},
                                  {"kernels", globs},
                                  {"files", file_list}};
  try {
    write_file_atomically(dir / "catalog.jsonl", catalog);
    write_file_atomically(dir / "summary.json", summary.dump(1) + "\n");
  } catch (const std::exception& e) {
    return bad_input(err, e.what());
  }

  // The table by family, then the totals.
  std::map<std::string, std::set<std::string>> rules_seen;
  for (const auto& m : all)
    rules_seen[m.family].insert(m.rule);
  char line[160];
  std::snprintf(line, sizeof line, "%-16s %5s %8s\n", "family", "rules", "mutants");
  out << line;
  for (const auto& f : mutant_families()) {
    std::snprintf(line, sizeof line, "%-16s %5zu %8d\n", f.c_str(), rules_seen[f].size(),
                  by_family[f]);
    out << line;
  }
  out << all.size() << " mutants in " << families_present << " families over " << by_task.size()
      << " tasks (" << files.size() << " files)\n";
  return exit_code::ok;
}

} // namespace kg
