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
#include "suite/audit_inputs.h"
#include "suite/audit_protocols_command.h"
#include "suite/exit_codes.h"
#include "suite/mutants_command.h"
#include "suite/progress_meter.h"

namespace kg {

namespace fs = std::filesystem;

namespace {

constexpr const char* column = "cmd";

int bad_input(std::ostream& err, const std::string& why) {
  err << "kernelgate: audit checker: " << printable(why, 600) << "\n";
  return exit_code::bad_input;
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
  if (!o.protocol.empty() && !o.cmd.empty())
    return bad_input(err, "--cmd and --protocol are alternatives: give one");
  if (o.protocol.empty() && o.cmd.empty()) return bad_input(err, "give --cmd or --protocol");
  if (!o.protocol.empty()) return run_audit_protocols_command(o, out, err);
  const auto t0 = std::chrono::steady_clock::now();
  if (o.out.empty()) return bad_input(err, "--out is empty");
  if (o.timeout < 0) return bad_input(err, "--timeout must be > 0");
  const double timeout = o.timeout > 0 ? o.timeout : 300;
  try {
    (void)expand_checker_command(o.cmd, "task.json", "candidate.cu", "workdir");
  } catch (const checker_command_error& e) {
    return bad_input(err, e.what());
  }
  if (o.witnesses.empty()) return bad_input(err, "--cmd needs --witnesses");
  audit_inputs in;
  if (const auto why = read_audit_inputs(o, in); !why.empty()) return bad_input(err, why);
  const auto& mutants = in.mutants;
  const auto& status = in.status;
  auto& sources = in.sources;
  auto& task_of_path = in.task_of_path;
  const auto& task_file = in.task_file;
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
  progress_meter meter(out, progress_bar_wanted(out, o.no_progress), work.size());
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < std::min<std::size_t>(jobs, std::max<std::size_t>(work.size(), 1)); ++t)
    pool.emplace_back([&] {
      for (std::size_t i = next++; i < work.size(); i = next++) {
        const auto& c = work[i];
        meter.start(c.row);
        const auto w =
            scratch / (c.row.rfind("control:", 0) == 0 ? "control-" + std::to_string(i) : c.row);
        fs::create_directories(w);
        std::ofstream(w / "candidate.cu", std::ios::binary) << c.source;
        const auto a = run_external_checker(o.cmd, task_file.at(c.task), w / "candidate.cu",
                                            w / "scratch", timeout);
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
        char line[64];
        std::snprintf(line, sizeof line, "  (%.1f s)", a.seconds);
        meter.done("[" + std::to_string(meter.done_count() + 1) + "/" +
                   std::to_string(work.size()) + "] " + c.row + "  " +
                   std::string(kill_verdict_name(a.verdict)) + line);
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
  meter.finish();
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
                                  {"checker", {{"cmd", o.cmd}, {"timeout_seconds", timeout}}},
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
