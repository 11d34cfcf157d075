#include "suite/merge_command.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/printable.h"
#include "reports/colocation.h"
#include "reports/result_writer.h"
#include "suite/audit_checker_parts.h"
#include "suite/exit_codes.h"
#include "suite/shard_plan.h"
#include "suite/suite_runner.h"

namespace kg {

namespace fs = std::filesystem;

namespace {

struct merge_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct shard_folder {
  fs::path dir;
  shard_manifest m;
  std::optional<nlohmann::json> result; // result.json (run) or summary.json (audit): it finished
};

// What must match for two shards' results to be one result; "" when they do.
std::string build_of(const nlohmann::json& env) {
  const auto git = env.value("git", nlohmann::json::object());
  return env.value("build", nlohmann::json::object()).dump() + " revision " +
         git.value("revision", nlohmann::json("?")).dump() +
         (git.value("dirty", false) ? " (dirty)" : "");
}

std::string gpu_model_of(const nlohmann::json& env) {
  const auto gpu = env.value("gpu", nlohmann::json::object());
  const auto name = gpu.value("name", nlohmann::json("unavailable"));
  return name.is_string() ? name.get<std::string>() : name.dump();
}

void check_same(const shard_folder& a, const shard_folder& b) {
  auto differ = [&](const std::string& what, const std::string& x, const std::string& y) {
    throw merge_error("shards of different " + what + ": " + a.dir.string() + " (" +
                      printable(x, 200) + ") and " + b.dir.string() + " (" + printable(y, 200) +
                      ")");
  };
  if (a.m.command != b.m.command) differ("commands", a.m.command, b.m.command);
  if (a.m.spec.count != b.m.spec.count)
    differ("shard counts", std::to_string(a.m.spec.count), std::to_string(b.m.spec.count));
  if (build_of(a.m.environment) != build_of(b.m.environment))
    differ("builds", build_of(a.m.environment), build_of(b.m.environment));
  if (gpu_model_of(a.m.environment) != gpu_model_of(b.m.environment))
    differ("GPU models", gpu_model_of(a.m.environment), gpu_model_of(b.m.environment));
  if (a.m.identity != b.m.identity) {
    for (const auto& [k, v] : a.m.identity.items())
      if (b.m.identity.value(k, nlohmann::json()) != v)
        differ(k == "suite_sha256" || k == "suite" ? "suites" : "options (" + k + ")", v.dump(),
               b.m.identity.value(k, nlohmann::json()).dump());
    differ("options", a.m.identity.dump(), b.m.identity.dump());
  }
  if (a.m.items != b.m.items)
    differ("work plans", std::to_string(a.m.items.size()) + " items",
           std::to_string(b.m.items.size()) + " items");
}

std::optional<nlohmann::json> read_json(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  if (!in) return std::nullopt;
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

std::string log_tail(const std::string& logs, int index, int lines = 12) {
  if (logs.empty()) return "";
  std::ifstream in(fs::path(logs) / ("shard-" + std::to_string(index) + ".log"), std::ios::binary);
  if (!in) return "";
  std::vector<std::string> all;
  for (std::string l; std::getline(in, l);)
    all.push_back(l);
  std::string tail;
  for (std::size_t i = all.size() > static_cast<std::size_t>(lines) ? all.size() - lines : 0;
       i < all.size(); ++i)
    tail += all[i] + "\n";
  return tail;
}

// The shards given, checked against each other; a folder that is not a shard is named on err and
// left out (a shard that died before writing shard.json looks like that).
std::vector<shard_folder> read_shards(const merge_options& o, std::ostream& err) {
  std::vector<shard_folder> shards;
  for (const auto& d : o.dirs) {
    if (fs::weakly_canonical(d) == fs::weakly_canonical(o.out))
      throw merge_error("--out " + o.out + " is one of the shard folders");
    try {
      auto m = read_shard_manifest(d);
      // A finished shard's last file: summary.json (audit checker) or result.json.
      const auto last = m.command == "audit checker" ? "summary.json" : "result.json";
      shard_folder s{d, std::move(m), read_json(fs::path(d) / last)};
      shards.push_back(std::move(s));
    } catch (const std::runtime_error& e) {
      err << "kernelgate: merge: left out: " << printable(e.what(), 300) << "\n";
    }
  }
  if (shards.empty())
    throw merge_error("no shard folder among the " + std::to_string(o.dirs.size()) + " given");
  std::sort(shards.begin(), shards.end(),
            [](const auto& a, const auto& b) { return a.m.spec.index < b.m.spec.index; });
  for (std::size_t i = 1; i < shards.size(); ++i) {
    check_same(shards[0], shards[i]);
    if (shards[i].m.spec.index == shards[i - 1].m.spec.index)
      throw merge_error("two folders are shard " + std::to_string(shards[i].m.spec.index) + ": " +
                        shards[i - 1].dir.string() + " and " + shards[i].dir.string());
  }
  return shards;
}

// Every item's record from the shard it was assigned to; throws merge_error on an item recorded
// twice. `key` is the record's id field.
std::map<std::string, nlohmann::json> collect(const std::vector<shard_folder>& shards,
                                              const std::string& file, const std::string& key,
                                              const std::string& type) {
  std::map<std::string, nlohmann::json> by_id;
  std::map<std::string, std::string> where;
  for (const auto& s : shards) {
    const std::set<std::string> mine(s.m.assigned.begin(), s.m.assigned.end());
    if (!fs::exists(s.dir / file)) continue;
    std::vector<nlohmann::json> lines;
    try {
      lines = read_records(s.dir / file);
    } catch (const std::exception& e) {
      throw merge_error(e.what());
    }
    for (auto& r : lines) {
      if (!r.is_object() || !r.contains(key) || !r[key].is_string()) continue;
      if (!type.empty() && r.value("type", "") != type) continue;
      const auto id = r[key].get<std::string>();
      if (!mine.count(id)) continue; // (not this shard's: never merged from it)
      if (by_id.count(id))
        throw merge_error(id + " is recorded twice: in " + where[id] + " and " +
                          (s.dir / file).string());
      where[id] = (s.dir / file).string();
      by_id[id] = std::move(r);
    }
  }
  return by_id;
}

// Per shard of the plan: its folder and state; per missing item: its shard and why.
struct accounting {
  nlohmann::json shards = nlohmann::json::array();
  nlohmann::json missing = nlohmann::json::array();
};

accounting account(const std::vector<shard_folder>& shards,
                   const std::map<std::string, nlohmann::json>& found, const std::string& logs,
                   const std::string& finished_field) {
  accounting a;
  const int n = shards[0].m.spec.count;
  // The whole plan's split is the same in every shard: the absent ones' items are those no
  // present shard was given.
  std::set<std::string> given;
  for (const auto& s : shards)
    given.insert(s.m.assigned.begin(), s.m.assigned.end());
  for (int i = 0; i < n; ++i) {
    const shard_folder* s = nullptr;
    for (const auto& x : shards)
      if (x.m.spec.index == i) s = &x;
    nlohmann::json row = {{"index", i}};
    std::string why;
    std::vector<std::string> items;
    if (!s) {
      row["state"] = "absent";
      why = "shard " + std::to_string(i) +
            " left no shard folder (it never started, or the "
            "folder was not given)";
    } else {
      int recorded = 0;
      for (const auto& id : s->m.assigned)
        recorded += found.count(id) ? 1 : 0;
      items = s->m.assigned;
      const bool finished = s->result.has_value();
      row["folder"] = fs::absolute(s->dir).lexically_normal().string();
      row["state"] = finished ? "finished" : "unfinished";
      row["assigned"] = s->m.assigned.size();
      row["recorded"] = recorded;
      row["host"] = s->m.environment.value("os", nlohmann::json::object()).value("hostname", "");
      row["slurm"] = s->m.slurm;
      if (finished && !finished_field.empty())
        row[finished_field] = s->result->value(finished_field, nlohmann::json());
      why = finished
                ? "shard " + std::to_string(i) + " finished without it"
                : "shard " + std::to_string(i) + " did not finish (" + std::to_string(recorded) +
                      " of its " + std::to_string(s->m.assigned.size()) + " items recorded)";
    }
    if (!s)
      for (const auto& id : shards[0].m.items)
        if (!given.count(id)) items.push_back(id);
    int missing_here = 0;
    for (const auto& id : items)
      if (!found.count(id)) {
        a.missing.push_back({{"id", id}, {"shard", i}, {"why", why}});
        ++missing_here;
      }
    row["missing"] = missing_here;
    // The log of a shard that left work undone: why, in its own words.
    if (missing_here > 0 || row["state"] != "finished")
      if (const auto tail = log_tail(logs, i); !tail.empty()) row["log_tail"] = tail;
    a.shards.push_back(row);
  }
  return a;
}

void report_missing(const accounting& a, std::ostream& err) {
  for (const auto& s : a.shards) {
    if (s["missing"].get<int>() == 0) continue;
    err << "kernelgate: merge: shard " << s["index"].get<int>() << " ("
        << s["state"].get<std::string>() << "): " << s["missing"].get<int>() << " items missing";
    if (s.contains("log_tail")) {
      err << "; its log ends:\n";
      std::istringstream lines(s["log_tail"].get<std::string>());
      for (std::string l; std::getline(lines, l);)
        err << "  | " << printable(l, 300) << "\n";
    } else {
      err << "\n";
    }
  }
}

// The envelope both a run's and an evaluation's merge write: the first finished shard's
// environment and configuration with the whole plan's accounting, times from the shards (so
// merging again writes the same bytes), records in the plan's order.
struct merged_envelope {
  nlohmann::json doc;
  std::vector<nlohmann::json> records;
  accounting a;
  bool all_complete = true;
};

merged_envelope merge_envelope(const merge_options& o, const std::vector<shard_folder>& shards,
                               const std::vector<std::string>& args, const std::string& kind,
                               const std::string& record_type) {
  merged_envelope e;
  const auto found = collect(shards, "records.jsonl", "id", record_type);
  e.a = account(shards, found, o.logs, "");
  const shard_folder* ref = nullptr;
  for (const auto& s : shards)
    if (s.result && !ref) ref = &s;
  nlohmann::json env =
      ref ? ref->result->value("environment", nlohmann::json()) : shards[0].m.environment;
  nlohmann::json config =
      ref ? ref->result->value("config", nlohmann::json::object()) : shards[0].m.identity;
  config["shard"] = nullptr;
  config["shards"] = e.a.shards;
  std::string created, finished;
  for (const auto& s : shards) {
    if (!s.result) {
      e.all_complete = false;
      continue;
    }
    const auto c = s.result->value("created", ""), f = s.result->value("finished", "");
    if (created.empty() || c < created) created = c;
    if (f > finished) finished = f;
    e.all_complete =
        e.all_complete &&
        s.result->value("summary", nlohmann::json::object()).value("status", "") == "complete";
  }
  e.all_complete = e.all_complete && static_cast<int>(shards.size()) == shards[0].m.spec.count;
  for (const auto& id : shards[0].m.items)
    if (auto f = found.find(id); f != found.end()) e.records.push_back(f->second);
  auto when = [](const std::string& t) {
    return t.empty() ? nlohmann::json(nullptr) : nlohmann::json(t);
  };
  e.doc = {{"schema", result_schema_id}, {"kind", kind},
           {"created", when(created)},   {"argv", args},
           {"environment", env},         {"config", config},
           {"finished", when(finished)}, {"records", e.records}};
  return e;
}

void write_envelope(const merge_options& o, const merged_envelope& e) {
  std::string lines;
  for (const auto& r : e.records)
    lines += r.dump() + "\n";
  std::error_code ec;
  fs::create_directories(o.out, ec);
  try {
    write_file_atomically(fs::path(o.out) / "records.jsonl", lines);
    write_file_atomically(fs::path(o.out) / "result.json", e.doc.dump(1) + "\n");
  } catch (const std::exception& x) {
    throw output_error(x.what());
  }
}

int merge_evals(const merge_options& o, const std::vector<shard_folder>& shards,
                const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto e = merge_envelope(o, shards, args, "eval", "evaluation");
  std::map<std::string, int> by_status;
  for (const auto& r : e.records)
    ++by_status[r.value("status", std::string("?"))];
  nlohmann::json seed = nullptr;
  for (const auto& s : shards)
    if (s.result && seed.is_null())
      seed = s.result->value("summary", nlohmann::json::object()).value("seed", nlohmann::json());
  const bool complete = e.a.missing.empty() && e.all_complete;
  e.doc["summary"] = {{"status", complete ? "complete" : "incomplete"},
                      {"pairs", e.records.size()},
                      {"pairs_planned", shards[0].m.items.size()},
                      {"by_status", by_status},
                      {"missing", e.a.missing},
                      {"seed", seed}};
  write_envelope(o, e);
  report_missing(e.a, err);
  out << "merged " << shards.size() << " of " << shards[0].m.spec.count
      << " shards: " << e.records.size() << " of " << shards[0].m.items.size() << " pairs, "
      << e.a.missing.size() << " missing; statuses:";
  for (const auto& [k, n] : by_status)
    out << " " << k << " " << n;
  out << "\nWrote " << (fs::path(o.out) / "result.json").string() << "\n";
  const bool all_passed = by_status.size() == 1 && by_status.count("PASSED");
  return complete && all_passed ? exit_code::ok : exit_code::failures;
}

int merge_runs(const merge_options& o, const std::vector<shard_folder>& shards,
               const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto e = merge_envelope(o, shards, args, "suite_run", "suite_workload");
  double wall_max = 0, wall_sum = 0;
  nlohmann::json setups = nlohmann::json::array();
  for (const auto& s : shards) {
    if (!s.result) continue;
    const auto sum = s.result->value("summary", nlohmann::json::object());
    const double w = sum.value("wall_seconds", 0.0);
    wall_max = std::max(wall_max, w);
    wall_sum += w;
    for (auto x : sum.value("setups", nlohmann::json::array())) {
      if (x.is_object()) x["shard"] = s.m.spec.index;
      setups.push_back(x);
    }
  }
  int failing = 0;
  for (const auto& r : e.records)
    failing += !record_gates_pass(r);
  const bool complete = e.a.missing.empty() && e.all_complete;
  e.doc["summary"] = {{"status", complete ? "complete" : "incomplete"},
                      {"gates_passed", failing == 0 && complete},
                      {"workloads", e.records.size()},
                      {"workloads_planned", shards[0].m.items.size()},
                      {"workloads_failing_gates", failing},
                      {"missing", e.a.missing},
                      {"wall_seconds", wall_max},
                      {"shard_seconds", wall_sum},
                      {"setups", setups}};
  // Recomputed over all shards: a workload's solo twin may have run in another shard.
  const auto colocation = colocation_fractions(e.records);
  e.doc["summary"]["colocation"] = to_json(colocation);
  write_envelope(o, e);
  report_missing(e.a, err);
  out << colocation_text(colocation);
  out << "merged " << shards.size() << " of " << shards[0].m.spec.count
      << " shards: " << e.records.size() << " of " << shards[0].m.items.size() << " workloads, "
      << e.a.missing.size() << " missing, " << failing << " failing a gate\n"
      << "Wrote " << (fs::path(o.out) / "result.json").string() << "\n";
  return complete && failing == 0 ? exit_code::ok : exit_code::failures;
}

int merge_audits(const merge_options& o, const std::vector<shard_folder>& shards, std::ostream& out,
                 std::ostream& err) {
  audit_inputs in;
  audit_checker_options opt;
  try {
    opt = checker_options_of(shards[0].m.identity);
  } catch (const std::exception& e) {
    throw merge_error(shards[0].dir.string() + ": malformed identity: " + e.what());
  }
  if (const auto why = read_audit_inputs(opt, in); !why.empty())
    throw merge_error("the audit's inputs: " + why);
  std::vector<kill_row> rows;
  std::vector<checker_candidate> all;
  if (const auto why = checker_audit_plan(in, opt, rows, all); !why.empty())
    throw merge_error("the audit's inputs: " + why);
  std::vector<std::string> plan;
  for (const auto& c : all)
    plan.push_back(c.row);
  if (plan != shards[0].m.items)
    throw merge_error("the catalog or witnesses changed since the shards ran (" +
                      std::to_string(plan.size()) + " candidates now, " +
                      std::to_string(shards[0].m.items.size()) + " then)");
  const auto found = collect(shards, "verdicts.jsonl", "row", "");
  const auto a = account(shards, found, o.logs, "seconds");
  kill_matrix km(rows, {"cmd"});
  std::string lines;
  for (const auto& id : plan)
    if (auto f = found.find(id); f != found.end()) {
      try {
        km.set(id, "cmd", verdict_of_line(f->second));
      } catch (const std::exception& e) {
        throw merge_error(id + ": " + e.what());
      }
      lines += f->second.dump() + "\n";
    }
  double seconds = 0;
  for (const auto& s : shards)
    if (s.result) seconds = std::max(seconds, s.result->value("seconds", 0.0));
  std::error_code ec;
  fs::create_directories(o.out, ec);
  try {
    write_file_atomically(fs::path(o.out) / "verdicts.jsonl", lines);
  } catch (const std::exception& e) {
    throw output_error(e.what());
  }
  const bool complete = a.missing.empty();
  const nlohmann::json extra = {{"environment", shards[0].m.environment},
                                {"status", complete ? "complete" : "incomplete"},
                                {"missing", a.missing},
                                {"shards", a.shards},
                                {"sample", checker_sample_json(opt, rows, all)}};
  report_missing(a, err);
  const int rc =
      finish_checker_audit(o.out, km, in, {{"cmd", opt.cmd}, {"timeout_seconds", opt.timeout}},
                           found.size(), seconds, extra, out, err);
  out << "merged " << shards.size() << " of " << shards[0].m.spec.count
      << " shards: " << found.size() << " of " << plan.size() << " verdicts, " << a.missing.size()
      << " missing\n";
  if (rc == exit_code::bad_input) return rc;
  return complete && rc == exit_code::ok ? exit_code::ok : exit_code::failures;
}

} // namespace

int run_merge_command(const merge_options& o, const std::vector<std::string>& args,
                      std::ostream& out, std::ostream& err) {
  if (o.dirs.empty()) {
    err << "kernelgate: merge: give the shard folders\n";
    return exit_code::bad_input;
  }
  if (o.out.empty()) {
    err << "kernelgate: merge: --out is empty\n";
    return exit_code::bad_input;
  }
  try {
    const auto shards = read_shards(o, err);
    if (shards[0].m.command == "run") return merge_runs(o, shards, args, out, err);
    if (shards[0].m.command == "audit checker") return merge_audits(o, shards, out, err);
    if (shards[0].m.command == "eval") return merge_evals(o, shards, args, out, err);
    throw merge_error("cannot merge shards of '" + shards[0].m.command + "'");
  } catch (const merge_error& e) {
    err << "kernelgate: merge: " << printable(e.what(), 600) << "\n";
    return exit_code::bad_input;
  } catch (const output_error& e) {
    err << "kernelgate: merge: " << printable(e.what(), 400) << "\n";
    return exit_code::bad_input;
  }
}

} // namespace kg
