#include "reports/eval_results_io.h"

#include <cmath>
#include <map>
#include <set>

#include "reports/eval_status.h"
#include "reports/result_writer.h"

namespace kg {
namespace {

[[noreturn]] void fail(const json_file& f, const std::string& what) {
  throw fastp_input_error("'" + f.path.string() + "': " + what);
}

struct evaluation {
  std::string id, task, candidate, status, reason;
  std::optional<double> candidate_us, baseline_us, speedup;
  std::optional<interval> ci95;
};

std::optional<std::string> optional_string(const json_file& f, const nlohmann::json& r,
                                           const char* name, const std::string& where) {
  const auto it = r.find(name);
  if (it == r.end()) return std::nullopt;
  if (!it->is_string())
    fail(f, where + ": '" + name + "' must be a string, got " + it->type_name());
  return it->get<std::string>();
}

std::string required_string(const json_file& f, const nlohmann::json& r, const char* name,
                            const std::string& where) {
  auto s = optional_string(f, r, name, where);
  if (!s || s->empty()) fail(f, where + ": no '" + name + "'");
  return *s;
}

std::optional<double> optional_positive(const json_file& f, const nlohmann::json& r,
                                        const char* name, const std::string& where) {
  const auto it = r.find(name);
  if (it == r.end()) return std::nullopt;
  if (!it->is_number())
    fail(f, where + ": '" + name + "' must be a number, got " + it->type_name());
  const double v = it->get<double>();
  if (!(v > 0) || !std::isfinite(v))
    fail(f, where + ": '" + name + "' must be positive, got " + it->dump());
  return v;
}

evaluation read_evaluation(const json_file& f, const nlohmann::json& r, const std::string& where) {
  evaluation e;
  e.id = optional_string(f, r, "id", where).value_or("");
  e.task = required_string(f, r, "task", where);
  e.status = required_string(f, r, "status", where);
  if (!parse_eval_status(e.status)) fail(f, where + ": unknown status '" + e.status + "'");
  // kernelgate eval writes candidate "" for a task that has no candidate at all (MISSING).
  const auto cand = optional_string(f, r, "candidate", where);
  if (!cand) fail(f, where + ": no 'candidate'");
  e.candidate = *cand;
  if (e.candidate.empty() && e.status != "MISSING")
    fail(f,
         where + ": an empty 'candidate' with status " + e.status + " (only MISSING may have one)");
  e.reason = optional_string(f, r, "status_reason", where).value_or("");
  e.candidate_us = optional_positive(f, r, "candidate_us", where);
  e.baseline_us = optional_positive(f, r, "baseline_us", where);
  e.speedup = optional_positive(f, r, "speedup", where);
  if (const auto it = r.find("speedup_ci95"); it != r.end()) {
    if (!it->is_array() || it->size() != 2 || !(*it)[0].is_number() || !(*it)[1].is_number())
      fail(f, where + ": 'speedup_ci95' must be an array of two numbers, got " + it->dump());
    const double lo = (*it)[0].get<double>(), hi = (*it)[1].get<double>();
    if (!(lo > 0 && lo <= hi) || !std::isfinite(hi))
      fail(f, where + ": 'speedup_ci95' must be [lo, hi] with 0 < lo <= hi, got " + it->dump());
    e.ci95 = interval{lo, hi};
  }
  // Times belong to a candidate that passed (a failed candidate carries no time at all).
  if (e.status != "PASSED" && (e.candidate_us || e.speedup || e.ci95))
    fail(f, where +
                ": candidate_us, speedup and speedup_ci95 belong to PASSED records only, "
                "not " +
                e.status);
  if (e.speedup && !e.candidate_us) fail(f, where + ": 'speedup' without 'candidate_us'");
  if (e.ci95 && !e.speedup) fail(f, where + ": 'speedup_ci95' without 'speedup'");
  // No agreement check between speedup and baseline_us / candidate_us: kernelgate eval's speedup
  // is the ABBA-paired estimate, measured apart from the two cold medians.
  return e;
}

// `task_missing`: the reason of a candidate-less MISSING record for the task, if any.
task_outcome outcome(const std::string& task, const evaluation* e,
                     const std::string* task_missing) {
  task_outcome t;
  t.task = task;
  if (!e) {
    t.exclusion = ""; // missing: stays aligned (see the header)
    t.note = task_missing ? "MISSING: " + *task_missing : "no evaluation record";
    return t;
  }
  const auto with_reason = [&](std::string s) {
    return e->reason.empty() ? s : s + ": " + e->reason;
  };
  if (e->baseline_us) t.baseline_ms = *e->baseline_us / 1000.0;
  if (e->status == "MISSING") {
    t.exclusion = "";
    t.note = with_reason("MISSING");
    return t;
  }
  t.evaluated = true;
  if (e->status == "INVALID_REFERENCE") {
    t.judged = false;
    t.exclusion = with_reason("INVALID_REFERENCE");
    t.note = *t.exclusion;
    return t;
  }
  t.correct = e->status == "PASSED";
  if (e->candidate_us) t.candidate_ms = *e->candidate_us / 1000.0;
  t.speedup = e->speedup;
  t.speedup_ci95 = e->ci95;
  t.note = t.correct ? "" : with_reason(e->status);
  // A paired speedup measured the baseline too, even where baseline_us is absent.
  t.exclusion = e->baseline_us || e->speedup ? ""
                                             : "no baseline_us (baseline time) in record '" +
                                                   (e->id.empty() ? task : e->id) + "'";
  return t;
}

} // namespace

fastp_source eval_results_source(const json_file& result,
                                 const std::optional<std::string>& candidate) {
  const auto& doc = result.doc;
  if (!doc.is_object()) fail(result, "expected a kernelgate result object");
  const auto schema = optional_string(result, doc, "schema", "the envelope");
  if (schema != result_schema_id)
    fail(result, "schema '" + schema.value_or("") + "' is not " + result_schema_id);
  const auto kind = optional_string(result, doc, "kind", "the envelope").value_or("");
  if (kind != "eval")
    fail(result, "a kernelgate '" + kind + "' result; fastp scores 'eval' results");
  const auto cfg = doc.find("config");
  if (cfg == doc.end() || !cfg->is_object()) fail(result, "no 'config' object");
  const auto it = cfg->find("intended_tasks");
  if (it == cfg->end() || !it->is_array())
    fail(result, "'config.intended_tasks' must be an array of task ids");
  std::vector<std::string> intended;
  std::set<std::string, std::less<>> intended_set;
  for (const auto& t : *it) {
    if (!t.is_string() || t.get<std::string>().empty())
      fail(result, "'config.intended_tasks' holds " + t.dump() + ", not a task id");
    if (!intended_set.insert(t.get<std::string>()).second)
      fail(result, "'config.intended_tasks' lists '" + t.get<std::string>() + "' twice");
    intended.push_back(t.get<std::string>());
  }
  const auto recs = doc.find("records");
  if (recs == doc.end() || !recs->is_array()) fail(result, "'records' must be an array");

  std::vector<std::string> order; // candidates by first appearance
  std::map<std::string, std::map<std::string, evaluation>, std::less<>> by_candidate;
  std::map<std::string, std::string> task_missing; // candidate-less MISSING records: reason
  for (std::size_t i = 0; i < recs->size(); ++i) {
    const auto& r = (*recs)[i];
    std::string where = "record " + std::to_string(i);
    if (!r.is_object()) fail(result, where + ": expected an object, got " + r.type_name());
    if (const auto id = r.find("id"); id != r.end() && id->is_string())
      where += " ('" + id->get<std::string>() + "')";
    if (required_string(result, r, "type", where) != "evaluation") continue;
    auto e = read_evaluation(result, r, where);
    if (!intended_set.count(e.task))
      fail(result, where + ": task '" + e.task + "' is not in config.intended_tasks");
    if (e.candidate.empty()) {
      if (!task_missing.emplace(e.task, e.reason).second)
        fail(result, where + ": a second candidate-less record for task '" + e.task + "'");
      continue;
    }
    auto& tasks = by_candidate[e.candidate];
    if (tasks.empty()) order.push_back(e.candidate);
    const std::string task = e.task;
    if (!tasks.emplace(task, std::move(e)).second)
      fail(result, where + ": a second evaluation of task '" + task + "' for this candidate");
  }

  fastp_source src;
  src.description = {{"format", "kernelgate-eval"},
                     {"result", file_identity(result)},
                     {"intended", "config.intended_tasks"},
                     {"aligned",
                      "tasks whose record has baseline_us or a speedup, and missing "
                      "tasks; INVALID_REFERENCE and records without either are excluded"},
                     {"speedup", "the record's speedup (eval's paired estimate) when present, "
                                 "else baseline_us / candidate_us"}};
  if (const auto c = doc.find("created"); c != doc.end()) src.description["eval_created"] = *c;
  if (candidate) {
    if (!by_candidate.count(*candidate)) {
      std::string known;
      for (const auto& n : order)
        known += (known.empty() ? "" : ", ") + n;
      fail(result, "no candidate '" + *candidate +
                       "' (candidates: " + (known.empty() ? "none" : known) + ")");
    }
    order = {*candidate};
  }
  if (order.empty()) {
    src.notes.push_back("no evaluation records in " + result.path.string() +
                        ": every intended task is missing");
    order.push_back("");
  }
  for (const auto& name : order) {
    scored_candidate c;
    c.name = name;
    const auto found = by_candidate.find(name);
    c.tasks.reserve(intended.size());
    for (const auto& task : intended) {
      const evaluation* e = nullptr;
      if (found != by_candidate.end())
        if (const auto r = found->second.find(task); r != found->second.end()) e = &r->second;
      const auto m = task_missing.find(task);
      c.tasks.push_back(outcome(task, e, m == task_missing.end() ? nullptr : &m->second));
    }
    src.candidates.push_back(std::move(c));
  }
  return src;
}

} // namespace kg
