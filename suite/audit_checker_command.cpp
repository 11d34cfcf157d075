#include "suite/audit_checker_command.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/printable.h"
#include "mutants/kill_matrix.h"
#include "mutants/mutant_catalog.h"
#include "reports/mutation_report.h"
#include "reports/remove_tree.h"
#include "reports/result_writer.h"
#include "sandbox/external_checker.h"
#include "suite/exit_codes.h"
#include "suite/mutants_command.h"

namespace kg {

namespace fs = std::filesystem;

namespace {

constexpr const char* column = "cmd";

int bad_input(std::ostream& err, const std::string& why) {
  err << "kernelgate: audit checker: " << printable(why, 600) << "\n";
  return exit_code::bad_input;
}

std::string read_all(const fs::path& p, bool& ok) {
  std::ifstream in(p, std::ios::binary);
  ok = static_cast<bool>(in);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A witness file's status, as the kill matrix keeps it: a witness run's names as they are;
// `mutants equivalence`'s equivalent and compile_error taken, its other statuses not yet run.
witness_status status_from(const std::string& name) {
  if (name == "differs" || name == "host_code") return witness_status::not_run;
  return witness_status_from_name(name); // throws for anything else
}

// One candidate the checker judges.
struct candidate {
  std::string row; // the kill matrix row: a mutant id or "control:<path>"
  std::string task, source;
};

nlohmann::json score_json(const checker_score& s) {
  return s.to_json();
}

} // namespace

int run_audit_checker_command(const audit_checker_options& o, std::ostream& out,
                              std::ostream& err) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.out.empty()) return bad_input(err, "--out is empty");
  if (!(o.timeout > 0)) return bad_input(err, "--timeout must be > 0");
  try {
    (void)expand_checker_command(o.cmd, "task.json", "candidate.cu", "workdir");
  } catch (const checker_command_error& e) {
    return bad_input(err, e.what());
  }
  const fs::path root = o.root.empty() ? default_source_root() : fs::path(o.root);
  const fs::path tasks_dir = o.tasks_dir.empty() ? root / "data" / "tasks" : fs::path(o.tasks_dir);
  // The catalog, filtered by task (every id kept, to check the witness file against).
  std::vector<mutant> mutants;
  std::set<std::string> every_id;
  try {
    const auto task_filter = task_regex(o.tasks);
    for (auto& m : read_mutant_catalog(o.catalog)) {
      every_id.insert(m.id);
      if (std::regex_match(m.task, task_filter)) mutants.push_back(std::move(m));
    }
  } catch (const std::invalid_argument& e) {
    return bad_input(err, e.what());
  }
  // The witness statuses.
  std::map<std::string, witness_status> status;
  {
    std::ifstream in(o.witnesses);
    if (!in) return bad_input(err, "cannot read --witnesses '" + o.witnesses + "'");
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      ++n;
      try {
        const auto j = nlohmann::json::parse(line);
        const auto id = j.at("id").get<std::string>();
        const auto s = status_from(j.at("status").get<std::string>());
        status[id] = s;
      } catch (const std::exception& e) {
        return bad_input(err, "--witnesses line " + std::to_string(n) + ": " + e.what());
      }
    }
  }
  // An id the whole catalog lacks says the files do not belong together; ids of filtered-out
  // tasks are simply not used.
  for (const auto& [id, s] : status)
    if (!every_id.count(id))
      return bad_input(err, "--witnesses names mutant " + id + ", which the catalog lacks");

  // Sources, controls and task files.
  std::map<std::string, std::string> sources; // catalog path -> text
  std::map<std::string, std::string> task_of_path;
  for (const auto& m : mutants) {
    if (sources.count(m.path)) continue;
    bool ok = false;
    sources[m.path] = read_all(root / m.path, ok);
    if (!ok) return bad_input(err, "cannot read '" + (root / m.path).string() + "'");
    task_of_path[m.path] = m.task;
  }
  std::map<std::string, fs::path> task_file;
  for (const auto& [path, task] : task_of_path) {
    const auto f = tasks_dir / (task + ".json");
    if (!fs::is_regular_file(f))
      return bad_input(err, "task '" + task + "' has no task file " + f.string());
    task_file[task] = f;
  }
  std::vector<kill_row> rows;
  std::vector<candidate> work;
  for (const auto& [path, text] : sources) {
    rows.push_back({"control:" + path, "", task_of_path[path], witness_status::not_run, true});
    work.push_back({rows.back().id, task_of_path[path], text});
  }
  for (const auto& m : mutants) {
    const auto it = status.find(m.id);
    const auto s = it == status.end() ? witness_status::not_run : it->second;
    rows.push_back({m.id, m.family, m.task, s, false});
    if (s != witness_status::witnessed) continue;
    try {
      work.push_back({m.id, m.task, apply_mutant(sources[m.path], m)});
    } catch (const std::exception& e) {
      return bad_input(err, "the catalog does not match " + m.path + ": " + e.what());
    }
  }
  kill_matrix km(rows, {column});

  const fs::path dir = o.out, scratch = dir / "work";
  std::error_code ec;
  fs::create_directories(scratch, ec);
  if (ec || !fs::is_directory(scratch))
    return bad_input(err, "cannot create output folder '" + dir.string() + "'");
  std::ofstream stream(dir / "verdicts.jsonl", std::ios::trunc);
  if (!stream) return bad_input(err, "cannot write '" + (dir / "verdicts.jsonl").string() + "'");

  // The calls, `jobs` at once; each verdict streamed as it comes.
  const unsigned jobs = o.jobs > 0 ? static_cast<unsigned>(o.jobs)
                                   : std::max(1u, std::thread::hardware_concurrency());
  std::mutex mu;
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < std::min<std::size_t>(jobs, std::max<std::size_t>(work.size(), 1)); ++t)
    pool.emplace_back([&] {
      for (std::size_t i = next++; i < work.size(); i = next++) {
        const auto& c = work[i];
        const auto w =
            scratch / (c.row.rfind("control:", 0) == 0 ? "control-" + std::to_string(i) : c.row);
        fs::create_directories(w);
        std::ofstream(w / "candidate.cu", std::ios::binary) << c.source;
        const auto a = run_external_checker(o.cmd, task_file.at(c.task), w / "candidate.cu",
                                            w / "scratch", o.timeout);
        const bool keep = a.verdict == kill_verdict::error || a.verdict == kill_verdict::timeout;
        std::lock_guard<std::mutex> lock(mu);
        km.set(c.row, column, a.verdict);
        stream << nlohmann::json{{"row", c.row},
                                 {"task", c.task},
                                 {"verdict", kill_verdict_name(a.verdict)},
                                 {"detail", a.detail},
                                 {"seconds", a.seconds}}
                      .dump()
               << "\n"
               << std::flush;
        if (keep) { // the checker's log of an error or a timeout stays, under logs/
          std::error_code e2;
          fs::create_directories(dir / "logs", e2);
          fs::copy_file(w / "scratch" / "checker.log", dir / "logs" / (c.row + ".log"),
                        fs::copy_options::overwrite_existing, e2);
        }
        remove_tree(w);
      }
    });
  for (auto& th : pool)
    th.join();
  remove_tree(scratch);

  // Scores, escapes, false rejections.
  const auto total = km.score(column);
  nlohmann::json families = nlohmann::json::object();
  for (const auto& [f, s] : km.score_by_family(column))
    families[f] = score_json(s);
  nlohmann::json rejected = nlohmann::json::array(), escapes = nlohmann::json::array();
  for (const auto* r : km.false_rejections(column))
    rejected.push_back({{"control", r->id},
                        {"task", r->task},
                        {"verdict", kill_verdict_name(km.at(r->id, column))}});
  for (const auto* r : km.escapes(column))
    escapes.push_back({{"id", r->id}, {"family", r->family}, {"task", r->task}});
  std::map<std::string, int> statuses;
  for (const auto& r : km.rows())
    if (!r.control) ++statuses[std::string(witness_status_name(r.status))];
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const nlohmann::json summary = {{"schema", "kernelgate.audit.checker/1"},
                                  {"checker", {{"cmd", o.cmd}, {"timeout_seconds", o.timeout}}},
                                  {"mutants", mutants.size()},
                                  {"witness_statuses", statuses},
                                  {"controls", sources.size()},
                                  {"calls", work.size()},
                                  {"score", score_json(total)},
                                  {"families", families},
                                  {"false_rejections", rejected},
                                  {"escapes", escapes},
                                  {"valid", rejected.empty()},
                                  {"seconds", seconds}};
  try {
    write_file_atomically(dir / "kill_matrix.json", km.to_json().dump() + "\n");
    write_file_atomically(dir / "report.mutation.json",
                          mutation_report(km, column, mutants, sources).dump() + "\n");
    write_file_atomically(dir / "summary.json", summary.dump(1) + "\n");
  } catch (const std::exception& e) {
    return bad_input(err, e.what());
  }

  // The table: by family, then the totals and the verdict on the checker.
  char row[200];
  std::snprintf(row, sizeof row, "%-16s %9s %7s %8s %7s %8s  %s\n", "family", "witnessed", "killed",
                "survived", "errors", "timeouts", "escape rate [95%]");
  out << row;
  auto print = [&](const std::string& name, const checker_score& s) {
    const auto ci = s.escape_ci95();
    std::snprintf(row, sizeof row, "%-16s %9d %7d %8d %7d %8d  %.3f [%.3f, %.3f]\n", name.c_str(),
                  s.intended, s.killed, s.survived, s.errors, s.timeouts, s.escape_rate(), ci.lo,
                  ci.hi);
    out << row;
  };
  for (const auto& [f, s] : km.score_by_family(column))
    print(f, s);
  print("all", total);
  out << work.size() << " calls (" << sources.size() << " controls) in "
      << static_cast<long>(seconds + 0.5) << " s; ";
  if (rejected.empty()) {
    out << "every correct kernel accepted\n";
    return exit_code::ok;
  }
  out << rejected.size() << " correct kernel" << (rejected.size() == 1 ? "" : "s")
      << " rejected: the checker is invalid for";
  std::set<std::string> bad_tasks;
  for (const auto& r : rejected)
    bad_tasks.insert(r["task"].get<std::string>());
  for (const auto& t : bad_tasks)
    out << " " << t;
  out << "\n";
  return exit_code::failures;
}

} // namespace kg
