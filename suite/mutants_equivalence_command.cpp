#include "suite/mutants_equivalence_command.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/printable.h"
#include "mutants/mutant_catalog.h"
#include "reports/remove_tree.h"
#include "reports/result_writer.h"
#include "sandbox/sass_equivalence.h"
#include "suite/exit_codes.h"
#include "suite/mutants_command.h"
#include "suite/progress_meter.h"

namespace kg {

namespace fs = std::filesystem;

namespace {

int bad_input(std::ostream& err, const std::string& why) {
  err << "kernelgate: mutants equivalence: " << printable(why, 600) << "\n";
  return exit_code::bad_input;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Runs job(i) for i in [0, n) on `threads` threads.
void parallel_for(std::size_t n, unsigned threads, const std::function<void(std::size_t)>& job) {
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < std::max(1u, threads); ++t)
    pool.emplace_back([&] {
      for (std::size_t i = next++; i < n; i = next++)
        job(i);
    });
  for (auto& th : pool)
    th.join();
}

struct entry {
  mutant m;
  std::string status; // equivalent, differs, compile_error, host_code
};

} // namespace

int run_mutants_equivalence_command(const mutants_equivalence_options& o, std::ostream& out,
                                    std::ostream& err) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.out.empty()) return bad_input(err, "--out is empty");
  const fs::path root = o.root.empty() ? default_source_root() : fs::path(o.root);
  std::vector<entry> all;
  try {
    const auto tasks = task_regex(o.tasks);
    for (auto& m : read_mutant_catalog(o.catalog))
      if (std::regex_match(m.task, tasks)) all.push_back({std::move(m), ""});
  } catch (const std::invalid_argument& e) {
    return bad_input(err, e.what());
  }
  std::map<std::string, std::string> sources; // by catalog path
  for (const auto& e : all)
    if (!sources.count(e.m.path)) {
      std::ifstream f(root / e.m.path, std::ios::binary);
      if (!f) return bad_input(err, "cannot read '" + (root / e.m.path).string() + "'");
      std::ostringstream s;
      s << f.rdbuf();
      sources[e.m.path] = s.str();
    }
  std::vector<std::string> mutated(all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    const auto& src = sources[all[i].m.path];
    try {
      mutated[i] = apply_mutant(src, all[i].m);
    } catch (const std::exception& e) {
      return bad_input(err, "the catalog does not match " + all[i].m.path + ": " + e.what());
    }
    if (!in_device_only_code(src, all[i].m.offset)) all[i].status = "host_code";
  }
  const fs::path dir = o.out, work = dir / "work";
  std::error_code ec;
  fs::create_directories(work, ec);
  if (ec || !fs::is_directory(work))
    return bad_input(err, "cannot create output folder '" + dir.string() + "'");
  const unsigned jobs = o.jobs > 0 ? static_cast<unsigned>(o.jobs)
                                   : std::max(1u, std::thread::hardware_concurrency());

  // The originals, once each.
  const auto t_orig = std::chrono::steady_clock::now();
  std::vector<std::string> paths;
  for (const auto& [p, s] : sources)
    paths.push_back(p);
  std::vector<std::optional<std::string>> original(paths.size());
  std::size_t compiles = paths.size();
  for (const auto& e : all)
    compiles += e.status.empty();
  progress_meter meter(out, progress_bar_wanted(out, o.no_progress), compiles);
  parallel_for(paths.size(), jobs, [&](std::size_t i) {
    const auto w = work / ("original-" + std::to_string(i));
    meter.start(paths[i]);
    original[i] = compile_cubin_digest(sources[paths[i]], w);
    meter.done("original " + paths[i] + (original[i] ? "  compiled" : "  does not compile"));
    if (original[i]) remove_tree(w);
  });
  std::map<std::string, const std::optional<std::string>*> digest_of;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    if (!original[i])
      return bad_input(
          err, paths[i] + " does not compile as it is (log: " +
                   (work / ("original-" + std::to_string(i)) / "compile.log").string() + ")");
    digest_of[paths[i]] = &original[i];
  }
  const double original_seconds = seconds_since(t_orig);

  // The mutants in device-only code.
  const auto t_mut = std::chrono::steady_clock::now();
  std::vector<std::size_t> todo;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (all[i].status.empty()) todo.push_back(i);
  parallel_for(todo.size(), jobs, [&](std::size_t k) {
    const auto i = todo[k];
    const auto w = work / all[i].m.id;
    meter.start(all[i].m.id);
    const auto d = compile_cubin_digest(mutated[i], w);
    all[i].status = !d                                 ? "compile_error"
                    : *d == **digest_of[all[i].m.path] ? "equivalent"
                                                       : "differs";
    meter.done(all[i].m.id + "  " + all[i].m.task + "  " + all[i].m.family + "  " + all[i].status);
    remove_tree(w);
  });
  meter.finish();
  const double mutant_seconds = seconds_since(t_mut);
  remove_tree(work);

  std::map<std::string, std::map<std::string, int>> by_family; // family -> status -> count
  std::map<std::string, int> by_status;
  std::string lines;
  for (const auto& e : all) {
    ++by_family[e.m.family][e.status];
    ++by_status[e.status];
    lines += nlohmann::json{{"id", e.m.id},
                            {"family", e.m.family},
                            {"rule", e.m.rule},
                            {"task", e.m.task},
                            {"status", e.status}}
                 .dump() +
             "\n";
  }
  const nlohmann::json summary = {{"schema", "kernelgate.mutants.equivalence/1"},
                                  {"mutants", all.size()},
                                  {"compiled", todo.size() + paths.size()},
                                  {"jobs", jobs},
                                  {"statuses", by_status},
                                  {"families", by_family},
                                  {"seconds",
                                   {{"originals", original_seconds},
                                    {"mutants", mutant_seconds},
                                    {"total", seconds_since(t0)}}}};
  try {
    write_file_atomically(dir / "equivalence.jsonl", lines);
    write_file_atomically(dir / "summary.json", summary.dump(1) + "\n");
  } catch (const std::exception& e) {
    return bad_input(err, e.what());
  }
  char row[160];
  std::snprintf(row, sizeof row, "%-16s %10s %8s %13s %9s\n", "family", "equivalent", "differs",
                "compile_error", "host_code");
  out << row;
  for (const auto& f : mutant_families()) {
    auto& c = by_family[f];
    std::snprintf(row, sizeof row, "%-16s %10d %8d %13d %9d\n", f.c_str(), c["equivalent"],
                  c["differs"], c["compile_error"], c["host_code"]);
    out << row;
  }
  out << all.size() << " mutants, " << todo.size() + paths.size() << " compiles on " << jobs
      << " threads in " << static_cast<long>(seconds_since(t0) + 0.5) << " s ("
      << static_cast<long>(mutant_seconds + 0.5) << " s for the mutants)\n";
  return exit_code::ok;
}

} // namespace kg
