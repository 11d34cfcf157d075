#include "suite/audit_checker_command.h"
#include "suite/audit_checker_parts.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/printable.h"
#include "base/sha256.h"
#include "mutants/kill_matrix.h"
#include "mutants/mutant_catalog.h"
#include "reports/environment.h"
#include "reports/mutation_report.h"
#include "reports/remove_tree.h"
#include "reports/result_writer.h"
#include "sandbox/external_checker.h"
#include "suite/audit_inputs.h"
#include "suite/audit_protocols_command.h"
#include "suite/exit_codes.h"
#include "suite/mutants_command.h"
#include "suite/progress_meter.h"
#include "suite/shard_plan.h"
#include "timing/interrupt.h"

namespace kg {

namespace fs = std::filesystem;

namespace {

int bad_input(std::ostream& err, const std::string& why) {
  err << "kernelgate: audit checker: " << printable(why, 600) << "\n";
  return exit_code::bad_input;
}

nlohmann::json score_json(const checker_score& s) {
  return s.to_json();
}

constexpr const char* column = "cmd";

} // namespace

// (audit_checker_parts.h says what the sample is.)
std::vector<std::string>
sample_witnessed(const std::vector<std::pair<std::string, std::string>>& task_and_id,
                 std::size_t size, std::uint64_t seed) {
  std::vector<std::string> chosen;
  if (size == 0 || size >= task_and_id.size()) {
    for (const auto& [t, id] : task_and_id)
      chosen.push_back(id);
    return chosen;
  }
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> by_task; // (key, id)
  for (const auto& [t, id] : task_and_id)
    by_task[t].push_back({sha256_hex(std::to_string(seed) + ":" + id), id});
  // Each task's share: the whole part of size x its fraction, then one more for the largest
  // remainders (ties: task name) until the shares add up to size.
  const double total = static_cast<double>(task_and_id.size());
  std::vector<std::tuple<double, std::string, std::size_t>> share; // (-remainder, task, whole)
  std::size_t given = 0;
  for (const auto& [t, ids] : by_task) {
    const double exact = static_cast<double>(size) * static_cast<double>(ids.size()) / total;
    const auto whole = static_cast<std::size_t>(exact);
    share.push_back({-(exact - static_cast<double>(whole)), t, whole});
    given += whole;
  }
  std::sort(share.begin(), share.end());
  std::vector<std::pair<std::string, std::string>> picked; // (key, id)
  for (auto& [rem, t, whole] : share) {
    if (given < size && whole < by_task[t].size()) {
      ++whole;
      ++given;
    }
    auto& ids = by_task[t];
    std::sort(ids.begin(), ids.end());
    picked.insert(picked.end(), ids.begin(),
                  ids.begin() + static_cast<std::ptrdiff_t>(std::min(whole, ids.size())));
  }
  std::sort(picked.begin(), picked.end()); // (the tasks mixed: see audit_checker_parts.h)
  for (const auto& [key, id] : picked)
    chosen.push_back(id);
  return chosen;
}

// The kill matrix rows of an audit (the controls, then every mutant with its witness status) and
// the candidates the checker judges (the controls, then the witnessed mutants called, in the
// sample's order), in that order.
std::string checker_audit_plan(const audit_inputs& in, const audit_checker_options& o,
                               std::vector<kill_row>& rows, std::vector<checker_candidate>& work) {
  auto sources = in.sources;
  auto task_of_path = in.task_of_path;
  for (const auto& [path, text] : sources) {
    rows.push_back({"control:" + path, "", task_of_path[path], witness_status::not_run, true});
    work.push_back({rows.back().id, task_of_path[path], text});
  }
  std::vector<std::pair<std::string, std::string>> witnessed;
  for (const auto& m : in.mutants)
    if (const auto it = in.status.find(m.id);
        it != in.status.end() && it->second == witness_status::witnessed)
      witnessed.push_back({m.task, m.id});
  const auto chosen =
      sample_witnessed(witnessed, static_cast<std::size_t>(o.sample), o.sample_seed);
  std::map<std::string, std::size_t> order; // a called id's place in `chosen`
  for (std::size_t k = 0; k < chosen.size(); ++k)
    order[chosen[k]] = k;
  std::vector<std::optional<checker_candidate>> called(chosen.size());
  for (const auto& m : in.mutants) {
    const auto it = in.status.find(m.id);
    const auto s = it == in.status.end() ? witness_status::not_run : it->second;
    rows.push_back({m.id, m.family, m.task, s, false});
    const auto k = order.find(m.id);
    if (s != witness_status::witnessed || k == order.end()) continue;
    try {
      called[k->second] = checker_candidate{m.id, m.task, apply_mutant(sources[m.path], m)};
    } catch (const std::exception& e) {
      return "the catalog does not match " + m.path + ": " + e.what();
    }
  }
  for (auto& c : called)
    if (c) work.push_back(std::move(*c));
  return "";
}

nlohmann::json checker_audit_identity(const audit_checker_options& o, const audit_inputs& in,
                                      double timeout) {
  auto abs = [](const fs::path& p) {
    return p.empty() ? "" : fs::absolute(p).lexically_normal().string();
  };
  nlohmann::json id = {{"cmd", o.cmd},
                       {"catalog", abs(o.catalog)},
                       {"witnesses", abs(o.witnesses)},
                       {"root", abs(in.root)},
                       {"tasks_dir", abs(in.tasks_dir)},
                       {"tasks", o.tasks},
                       {"timeout_seconds", timeout}};
  if (o.sample > 0) { // (only then: the folders of unsampled audits keep their identity)
    id["sample"] = o.sample;
    id["sample_seed"] = o.sample_seed;
  }
  return id;
}

audit_checker_options checker_options_of(const nlohmann::json& identity) {
  audit_checker_options o;
  o.cmd = identity.at("cmd").get<std::string>();
  o.catalog = identity.at("catalog").get<std::string>();
  o.witnesses = identity.at("witnesses").get<std::string>();
  o.root = identity.at("root").get<std::string>();
  o.tasks_dir = identity.at("tasks_dir").get<std::string>();
  o.tasks = identity.at("tasks").get<std::string>();
  o.timeout = identity.at("timeout_seconds").get<double>();
  o.sample = identity.value("sample", 0);
  o.sample_seed = identity.value("sample_seed", o.sample_seed);
  return o;
}

nlohmann::json checker_sample_json(const audit_checker_options& o,
                                   const std::vector<kill_row>& rows,
                                   const std::vector<checker_candidate>& work) {
  if (o.sample <= 0) return nullptr;
  const auto witnessed = std::count_if(rows.begin(), rows.end(), [](const kill_row& r) {
    return !r.control && r.status == witness_status::witnessed;
  });
  const auto called = std::count_if(work.begin(), work.end(), [](const checker_candidate& c) {
    return c.row.rfind("control:", 0) != 0;
  });
  return {
      {"size", o.sample}, {"seed", o.sample_seed}, {"witnessed", witnessed}, {"called", called}};
}

nlohmann::json verdict_line(const std::string& row, const std::string& task, kill_verdict v,
                            const std::string& detail, double seconds) {
  return {{"row", row},
          {"task", task},
          {"verdict", kill_verdict_name(v)},
          {"detail", detail},
          {"seconds", seconds}};
}

kill_verdict verdict_of_line(const nlohmann::json& line) {
  const auto name = line.at("verdict").get<std::string>();
  for (auto v :
       {kill_verdict::killed, kill_verdict::survived, kill_verdict::error, kill_verdict::timeout})
    if (kill_verdict_name(v) == name) return v;
  throw std::invalid_argument("unknown verdict '" + name + "'");
}

int finish_checker_audit(const fs::path& dir, const kill_matrix& km, const audit_inputs& in,
                         const nlohmann::json& checker, std::size_t calls, double seconds,
                         const nlohmann::json& extra, std::ostream& out, std::ostream& err) {
  const auto& mutants = in.mutants;
  const auto& sources = in.sources;
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
  nlohmann::json summary = {{"schema", "kernelgate.audit.checker/1"},
                            {"checker", checker},
                            {"mutants", mutants.size()},
                            {"witness_statuses", statuses},
                            {"controls", sources.size()},
                            {"calls", calls},
                            {"score", score_json(total)},
                            {"families", families},
                            {"false_rejections", rejected},
                            {"escapes", escapes},
                            {"valid", rejected.empty()},
                            {"seconds", seconds}};
  for (const auto& [k, v] : extra.items())
    summary[k] = v;
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
  out << calls << " calls (" << sources.size() << " controls) in "
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

namespace {

// A resumed folder's verdicts: the whole lines of verdicts.jsonl (a torn last line is cut off the
// file, its call made again). "" or what is wrong.
std::string resume_verdicts(const fs::path& file, std::map<std::string, nlohmann::json>& done) {
  int torn = 0;
  std::vector<nlohmann::json> lines;
  try {
    lines = read_records(file, &torn);
  } catch (const std::exception& e) {
    return e.what();
  }
  if (torn) {
    std::ifstream in(file, std::ios::binary);
    std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    in.close();
    const auto last = text.rfind('\n');
    fs::resize_file(file, last == std::string::npos ? 0 : last + 1);
  }
  for (auto& l : lines)
    if (l.is_object() && l.contains("row") && l["row"].is_string()) {
      const auto row = l["row"].get<std::string>();
      done[row] = std::move(l);
    }
  return "";
}

} // namespace

int run_audit_checker_command(const audit_checker_options& o, std::ostream& out,
                              std::ostream& err) {
  if (!o.protocol.empty() && !o.cmd.empty())
    return bad_input(err, "--cmd and --protocol are alternatives: give one");
  if (o.protocol.empty() && o.cmd.empty()) return bad_input(err, "give --cmd or --protocol");
  if (!o.protocol.empty()) {
    if (!o.shard.empty() || !o.resume.empty())
      return bad_input(err, "--shard and --resume are for --cmd (--protocol runs on one GPU)");
    if (o.sample > 0)
      return bad_input(err, "--sample is for --cmd (--protocol judges every mutant it witnesses)");
    return run_audit_protocols_command(o, out, err);
  }
  const auto t0 = std::chrono::steady_clock::now();
  if (!o.resume.empty() && !o.out.empty() && fs::path(o.out) != fs::path(o.resume))
    return bad_input(err, "--resume writes into the folder it resumes; drop --out");
  const std::string out_dir = o.resume.empty() ? o.out : o.resume;
  if (out_dir.empty()) return bad_input(err, "--out is empty");
  if (o.timeout < 0) return bad_input(err, "--timeout must be > 0");
  const double timeout = o.timeout > 0 ? o.timeout : 300;
  shard_spec part;
  if (!o.shard.empty()) {
    std::string why;
    const auto s = parse_shard_spec(o.shard, why);
    if (!s) return bad_input(err, "--shard: " + why);
    part = *s;
  }
  try {
    (void)expand_checker_command(o.cmd, "task.json", "candidate.cu", "workdir");
  } catch (const checker_command_error& e) {
    return bad_input(err, e.what());
  }
  if (o.witnesses.empty()) return bad_input(err, "--cmd needs --witnesses");
  audit_inputs in;
  if (const auto why = read_audit_inputs(o, in); !why.empty()) return bad_input(err, why);
  const auto& task_file = in.task_file;
  std::vector<kill_row> rows;
  std::vector<checker_candidate> all;
  if (o.sample < 0) return bad_input(err, "--sample must be >= 0");
  if (const auto why = checker_audit_plan(in, o, rows, all); !why.empty())
    return bad_input(err, why);
  kill_matrix km(rows, {column});
  // This process's part: every candidate, or its shard's (each call costs about the same).
  std::vector<shard_item> items;
  for (const auto& c : all)
    items.push_back({c.row, 1, "", 0});
  std::vector<checker_candidate> work;
  for (const auto i : items_of_shard(items, part))
    work.push_back(all[i]);
  const auto identity = checker_audit_identity(o, in, timeout);

  const fs::path dir = out_dir, scratch = dir / "work";
  std::map<std::string, nlohmann::json> done;
  if (!o.resume.empty()) {
    try {
      const auto m = read_shard_manifest(dir);
      if (m.command != "audit checker" || m.identity != identity || !(m.spec == part))
        return bad_input(err, "cannot resume " + dir.string() +
                                  ": a different audit (command, catalog, witnesses, checker, "
                                  "tasks, timeout or shard differ)");
    } catch (const std::runtime_error& e) {
      return bad_input(err, std::string("cannot resume: ") + e.what());
    }
    if (const auto why = resume_verdicts(dir / "verdicts.jsonl", done); !why.empty())
      return bad_input(err, "cannot resume " + dir.string() + ": " + why);
  }
  std::error_code ec;
  fs::create_directories(scratch, ec);
  if (ec || !fs::is_directory(scratch))
    return bad_input(err, "cannot create output folder '" + dir.string() + "'");
  try {
    std::vector<std::string> items, assigned;
    for (const auto& c : all)
      items.push_back(c.row);
    for (const auto& c : work)
      assigned.push_back(c.row);
    write_shard_manifest(dir, make_shard_manifest("audit checker", part, std::move(items),
                                                  std::move(assigned), identity));
  } catch (const std::exception& e) {
    return bad_input(err, e.what());
  }
  // Verdicts a resumed run already has stay; only its own rows count (a line for another row is
  // not this shard's and is ignored).
  std::vector<checker_candidate> todo;
  for (const auto& c : work) {
    const auto d = done.find(c.row);
    if (d == done.end()) {
      todo.push_back(c);
      continue;
    }
    try {
      km.set(c.row, column, verdict_of_line(d->second));
    } catch (const std::exception& e) {
      return bad_input(err, "cannot resume " + dir.string() + ": " + c.row + ": " + e.what());
    }
  }
  if (!o.resume.empty())
    err << "kernelgate: resuming " << dir.string() << ": " << work.size() - todo.size()
        << " verdicts kept, " << todo.size() << " calls to make\n";
  std::ofstream stream(dir / "verdicts.jsonl", o.resume.empty() ? std::ios::trunc : std::ios::app);
  if (!stream) return bad_input(err, "cannot write '" + (dir / "verdicts.jsonl").string() + "'");

  // The calls, `jobs` at once; each verdict streamed as it comes.
  const unsigned jobs = o.jobs > 0 ? static_cast<unsigned>(o.jobs)
                                   : std::max(1u, std::thread::hardware_concurrency());
  std::mutex mu;
  std::atomic<std::size_t> next{0};
  std::size_t recorded = work.size() - todo.size();
  progress_meter meter(out, progress_bar_wanted(out, o.no_progress), todo.size());
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < std::min<std::size_t>(jobs, std::max<std::size_t>(todo.size(), 1)); ++t)
    pool.emplace_back([&] {
      for (std::size_t i = next++; i < todo.size() && !stop_requested(); i = next++) {
        const auto& c = todo[i];
        meter.start(c.row);
        const auto w =
            scratch / (c.row.rfind("control:", 0) == 0 ? "control-" + std::to_string(i) : c.row);
        fs::create_directories(w);
        std::ofstream(w / "candidate.cu", std::ios::binary) << c.source;
        const auto a = run_external_checker(o.cmd, task_file.at(c.task), w / "candidate.cu",
                                            w / "scratch", timeout);
        // A call that ended after SIGINT/SIGTERM (Slurm's preemption and requeue signal the
        // checker too) is no verdict: --resume makes it again. (A checker that died of such a
        // signal first: run_process gave our handler its moment.)
        if (stop_requested()) {
          remove_tree(w);
          break;
        }
        const bool keep = a.verdict == kill_verdict::error || a.verdict == kill_verdict::timeout;
        std::lock_guard<std::mutex> lock(mu);
        km.set(c.row, column, a.verdict);
        ++recorded;
        stream << verdict_line(c.row, c.task, a.verdict, a.detail, a.seconds).dump() << "\n"
               << std::flush;
        char line[64];
        std::snprintf(line, sizeof line, "  (%.1f s)", a.seconds);
        meter.done("[" + std::to_string(meter.done_count() + 1) + "/" +
                   std::to_string(todo.size()) + "] " + c.row + "  " +
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
  if (stop_requested()) {
    // The matrix of the verdicts so far (the rest without one), so `audit agreement` can compare
    // what was judged; --resume rewrites it whole. No summary or report: those are the finished
    // audit's.
    std::string kept_matrix;
    try {
      write_file_atomically(dir / "kill_matrix.json", km.to_json().dump() + "\n");
      kept_matrix = ", their kill matrix in " + (dir / "kill_matrix.json").string();
    } catch (const std::exception&) { // (the verdicts are kept either way)
    }
    err << "kernelgate: audit checker interrupted: " << recorded << " of " << work.size()
        << " verdicts kept in " << (dir / "verdicts.jsonl").string() << kept_matrix << "; --resume "
        << dir.string() << " continues\n";
    return exit_code::interrupted;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json extra = {{"environment", collect_environment()}};
  if (!o.shard.empty()) extra["shard"] = {{"index", part.index}, {"count", part.count}};
  extra["sample"] = checker_sample_json(o, rows, all);
  if (o.sample > 0)
    out << "a sample: " << extra["sample"]["called"] << " of " << extra["sample"]["witnessed"]
        << " witnessed mutants, stratified by task (seed " << o.sample_seed
        << "); the others count as missing\n";
  return finish_checker_audit(dir, km, in, {{"cmd", o.cmd}, {"timeout_seconds", timeout}},
                              work.size(), seconds, extra, out, err);
}

} // namespace kg
