#include "reports/kernelbench_io.h"
#include "reports/json_input.h"

#include <optional>

#include <charconv>
#include <cmath>
#include <map>
#include <set>

namespace kg {
namespace {

[[noreturn]] void fail(const json_file& f, const std::string& what) {
  throw fastp_input_error("'" + f.path.string() + "': " + what);
}

// The whole string is a non-negative integer.
std::optional<long> parse_id(std::string_view s) {
  long v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

const nlohmann::json& field(const json_file& f, const nlohmann::json& obj, const char* name,
                            nlohmann::json::value_t type, const std::string& where) {
  const auto it = obj.find(name);
  if (it == obj.end()) fail(f, where + ": no '" + name + "'");
  const bool ok = type == nlohmann::json::value_t::number_float     ? it->is_number()
                  : type == nlohmann::json::value_t::number_integer ? it->is_number_integer()
                                                                    : it->type() == type;
  if (!ok) {
    const char* want = type == nlohmann::json::value_t::boolean          ? "a boolean"
                       : type == nlohmann::json::value_t::number_integer ? "an integer"
                                                                         : "a number";
    fail(f, where + ": '" + name + "' must be " + want + ", got " + it->type_name());
  }
  return *it;
}

struct sample0 {
  bool correct = false, compiled = false;
  double runtime_ms = -1;
};

struct eval_problems {
  std::map<long, sample0> scored;     // problems with a sample_id 0 entry
  std::map<long, std::size_t> others; // problems without one: how many samples they have
};

eval_problems read_eval(const json_file& f) {
  using vt = nlohmann::json::value_t;
  if (!f.doc.is_object())
    fail(f, std::string("expected an object of problem id -> samples, got ") + f.doc.type_name());
  eval_problems out;
  std::map<long, std::string> keys; // "1" and "01" name the same problem: refused, not merged
  for (const auto& [key, samples] : f.doc.items()) {
    const auto id = parse_id(key);
    if (!id) fail(f, "key '" + printable(key) + "' is not a problem id (a non-negative integer)");
    if (const auto [it, fresh] = keys.emplace(*id, key); !fresh)
      fail(f, "keys '" + printable(it->second) + "' and '" + printable(key) +
                  "' name the same problem " + std::to_string(*id));
    const std::string where = "problem " + key;
    if (!samples.is_array())
      fail(f, where + ": expected an array of samples, got " + samples.type_name());
    const nlohmann::json* chosen = nullptr;
    for (std::size_t i = 0; i < samples.size(); ++i) {
      const auto& s = samples[i];
      const std::string at = where + ", entry " + std::to_string(i);
      if (!s.is_object()) fail(f, at + ": expected an object, got " + s.type_name());
      const auto sid = field(f, s, "sample_id", vt::number_integer, at).get<long long>();
      field(f, s, "compiled", vt::boolean, at);
      field(f, s, "correctness", vt::boolean, at);
      field(f, s, "runtime", vt::number_float, at);
      if (sid != kernelbench_scored_sample) continue;
      // KernelBench's analysis asserts the same: one sample 0 per problem.
      if (chosen) fail(f, where + ": more than one entry with sample_id 0");
      chosen = &s;
    }
    if (!chosen) {
      out.others[*id] = samples.size();
      continue;
    }
    sample0 s;
    s.compiled = (*chosen)["compiled"].get<bool>();
    s.correct = (*chosen)["correctness"].get<bool>();
    s.runtime_ms = (*chosen)["runtime"].get<double>();
    out.scored[*id] = s;
  }
  return out;
}

struct baseline_level {
  std::string key;
  bool present = false;
  std::map<long, double> mean_ms;
  std::map<std::string, double> mean_ms_by_name; // by the whole problem file name
  std::set<std::string> hardware;
};

baseline_level read_baseline(const json_file& f, int level) {
  using vt = nlohmann::json::value_t;
  if (!f.doc.is_object())
    fail(f, std::string("expected an object of level -> problem file -> timing, got ") +
                f.doc.type_name());
  baseline_level out;
  out.key = "level" + std::to_string(level);
  const auto it = f.doc.find(out.key);
  if (it == f.doc.end()) return out;
  out.present = true;
  if (!it->is_object())
    fail(f,
         "'" + out.key + "' must be an object of problem file -> timing, got " + it->type_name());
  for (const auto& [name, entry] : it->items()) {
    const std::string where = out.key + " '" + name + "'";
    const auto us = name.find('_');
    const auto id = us == std::string::npos ? std::nullopt : parse_id(name.substr(0, us));
    if (!id) fail(f, where + ": the name has no '<id>_' prefix");
    if (!entry.is_object()) fail(f, where + ": expected an object, got " + entry.type_name());
    const double mean = field(f, entry, "mean", vt::number_float, where).get<double>();
    if (!(mean > 0) || !std::isfinite(mean))
      fail(f, where + ": 'mean' must be a positive time, got " + std::to_string(mean));
    if (!out.mean_ms.emplace(*id, mean).second)
      fail(f, where + ": a second baseline entry for problem " + std::to_string(*id));
    out.mean_ms_by_name[name] = mean;
    if (const auto h = entry.find("hardware"); h != entry.end() && h->is_string())
      out.hardware.insert(h->get<std::string>());
  }
  return out;
}

} // namespace

fastp_source kernelbench_source(const json_file& eval_results, const json_file& baseline, int level,
                                const std::optional<std::filesystem::path>& dataset) {
  if (level < 1)
    throw fastp_input_error("KernelBench levels start at 1, got " + std::to_string(level));
  const auto eval = read_eval(eval_results);
  const auto base = read_baseline(baseline, level);
  const std::string base_name = baseline.path.string();

  fastp_source src;
  auto base_desc = file_identity(baseline);
  base_desc["level"] = base.key;
  base_desc["entries"] = base.mean_ms.size();
  base_desc["hardware"] = base.hardware;
  src.description = {
      {"format", "kernelbench"},
      {"eval_results", file_identity(eval_results)},
      {"baseline", std::move(base_desc)},
      {"sample_id", kernelbench_scored_sample},
      {"intended", "every problem in eval_results or in the baseline level"},
      {"aligned", "problems with a baseline entry (matched by the '<id>_' file-name prefix)"}};
  src.no_interval_reason =
      "KernelBench's eval_results.json carries no interval of the speedup (runtime_stats is the "
      "spread of its timing trials)";
  if (base.mean_ms.empty())
    src.notes.push_back("no baseline entries for " + base.key + " in " + base_name +
                        (base.present ? "" : " (no '" + base.key + "' key)") +
                        ": 0 aligned problems");

  // The problems: the dataset's files when given (KernelBench's own intended set, baseline
  // entries matched by the whole file name), else every id seen in either file (matched by the
  // '<id>_' prefix).
  std::map<long, std::string> problem_file;
  if (dataset) {
    for (const auto& e : std::filesystem::directory_iterator(*dataset)) {
      const std::string name = e.path().filename().string();
      const auto us = name.find('_');
      if (e.path().extension() != ".py" || us == std::string::npos) continue;
      if (const auto id = parse_id(name.substr(0, us))) problem_file[*id] = name;
    }
    if (problem_file.empty())
      throw fastp_input_error("no KernelBench problem files ('<id>_<Name>.py') in " +
                              dataset->string());
    src.description["intended"] = "the problem files in " + dataset->string();
    src.description["aligned"] =
        "problems whose file name has a baseline entry (KernelBench's exact-name match)";
  }
  std::set<long> ids;
  if (dataset) {
    for (const auto& [id, name] : problem_file)
      ids.insert(id);
  } else {
    for (const auto& [id, s] : eval.scored)
      ids.insert(id);
    for (const auto& [id, n] : eval.others)
      ids.insert(id);
    for (const auto& [id, m] : base.mean_ms)
      ids.insert(id);
  }

  scored_candidate c;
  c.tasks.reserve(ids.size());
  for (const long id : ids) {
    task_outcome t;
    t.task = std::to_string(id);
    if (dataset) {
      const auto& name = problem_file.at(id);
      if (const auto b = base.mean_ms_by_name.find(name); b != base.mean_ms_by_name.end())
        t.baseline_ms = b->second;
      else
        t.exclusion = "no baseline entry named '" + name + "' in " + base_name + " " + base.key;
    } else if (const auto b = base.mean_ms.find(id); b != base.mean_ms.end()) {
      t.baseline_ms = b->second;
    } else {
      t.exclusion = "no baseline entry for problem " + t.task + " in " + base_name + " " + base.key;
    }
    if (const auto s = eval.scored.find(id); s != eval.scored.end()) {
      t.evaluated = true;
      t.correct = s->second.correct;
      // runtime is -1.0 when KernelBench did not time the sample.
      if (s->second.runtime_ms > 0) t.candidate_ms = s->second.runtime_ms;
      t.note = s->second.compiled ? "" : "not compiled";
    } else if (const auto o = eval.others.find(id); o != eval.others.end()) {
      t.note = "no sample_id 0 among its " + std::to_string(o->second) + " samples in " +
               eval_results.path.string();
    } else {
      t.note = "not in " + eval_results.path.string();
    }
    c.tasks.push_back(std::move(t));
  }
  src.candidates.push_back(std::move(c));
  return src;
}

} // namespace kg
