// kernelgate eval --tasks GLOB --candidates DIR [--protocol strict|PEER] [--trials N] [--timeout S]
//                 [--jobs N] [--cache DIR] [--time yes|no] [--baselines DIR] [--out DIR]
//                 [--kernelbench FILE]
#include "suite/eval_command.h"

#include <charconv>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "kernels/task_torch_refs.h"
#include "oracles/comparators.h"
#include "oracles/protocol.h"
#include "oracles/task_oracles.h"
#include "reports/environment.h"
#include "reports/result_writer.h"
#include "reports/sha256.h"
#include "suite/candidate_compiler.h"
#include "suite/exit_codes.h"
#include "suite/options.h"
#include "suite/sandbox.h"
#include "suite/task_catalog.h"
#include "suite/trial_cache.h"
#include "timing/device_info.h"
#include "timing/interrupt.h"

namespace kg {
namespace {

namespace fs = std::filesystem;

struct pair_plan {
  const task_def* task;
  std::string candidate;
  fs::path source; // empty: no candidate for the task
};

// DIR/<task>.cu is candidate <DIR's name>; DIR/<task>/<name>.cu is candidate <name>.
std::vector<pair_plan> find_pairs(const std::vector<task_def>& tasks, const fs::path& dir) {
  std::vector<pair_plan> out;
  const std::string dir_name = fs::absolute(dir).lexically_normal().filename().string();
  for (const auto& t : tasks) {
    bool any = false;
    if (const auto f = dir / (t.id + ".cu"); fs::is_regular_file(f)) {
      out.push_back({&t, dir_name.empty() ? "candidate" : dir_name, f});
      any = true;
    }
    if (const auto sub = dir / t.id; fs::is_directory(sub)) {
      std::vector<fs::path> files;
      for (const auto& e : fs::directory_iterator(sub))
        if (e.path().extension() == ".cu") files.push_back(e.path());
      std::sort(files.begin(), files.end());
      for (const auto& f : files) {
        out.push_back({&t, f.stem().string(), f});
        any = true;
      }
    }
    if (!any) out.push_back({&t, "", {}});
  }
  return out;
}

std::string file_sha256(const std::string& f) {
  std::ifstream in(f, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return sha256_hex(s.str());
}

fs::path worker_binary() {
  if (const char* e = std::getenv("KERNELGATE_WORKER"); e && *e) return e;
  return fs::read_symlink("/proc/self/exe");
}

} // namespace

int run_eval_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::map<std::string, std::string> o = {
      {"--tasks", ""},          {"--candidates", ""},
      {"--protocol", "strict"}, {"--trials", "3"},
      {"--timeout", "60"},      {"--jobs", "0"},
      {"--cache", ""},          {"--out", "kg-out/eval"},
      {"--time", "yes"},        {"--baselines", KG_TASK_KERNELS_DIR},
      {"--kernelbench", ""}};
  if (!read_options(args, o, err)) return exit_code::bad_input;
  if (o["--tasks"].empty() || o["--candidates"].empty()) {
    err << "kernelgate: eval needs --tasks GLOB and --candidates DIR\n";
    return exit_code::bad_input;
  }
  if (o["--time"] != "yes" && o["--time"] != "no") {
    err << "kernelgate: --time takes yes or no\n";
    return exit_code::bad_input;
  }
  // strict: the task's tolerance against the fp64 oracle. A peer's name: its checker as
  // oracles/protocol.h models it, against the LibTorch reference.
  std::optional<protocol> peer;
  if (o["--protocol"] != "strict") {
    peer = find_protocol(o["--protocol"]);
    if (!peer) {
      std::string known = "strict";
      for (const auto n : protocol_names())
        if (n != "strict") known += ", " + std::string(n);
      err << "kernelgate: unknown protocol '" << o["--protocol"] << "' (known: " << known << ")\n";
      return exit_code::bad_input;
    }
  }
  int trials = 0, jobs = 0;
  double timeout = 0;
  auto num = [&](const std::string& k, auto& v) {
    const auto& s = o[k];
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && p == s.data() + s.size();
  };
  if (!num("--trials", trials) || trials < 1 || !num("--timeout", timeout) || timeout <= 0 ||
      !num("--jobs", jobs) || jobs < 0) {
    err << "kernelgate: --trials and --jobs take whole numbers (trials >= 1), --timeout seconds > "
           "0\n";
    return exit_code::bad_input;
  }
  std::vector<task_def> tasks;
  try {
    tasks = load_tasks(o["--tasks"]);
  } catch (const task_error& e) {
    err << "kernelgate: " << e.what() << "\n";
    return exit_code::bad_input;
  }
  for (const auto& t : tasks)
    if (!find_task_oracle(t.op)) {
      err << "kernelgate: " << t.file << ": /op: no fp64 oracle for op '" << t.op << "'\n";
      return exit_code::bad_input;
    }
  if (!fs::is_directory(o["--candidates"])) {
    err << "kernelgate: --candidates '" << o["--candidates"] << "' is not a folder\n";
    return exit_code::bad_input;
  }
  const device_info dev = query_device(0);
  if (!dev.available) {
    err << "kernelgate: no GPU to evaluate on: " << dev.reason << "\n";
    return exit_code::unavailable;
  }
  const auto pairs = find_pairs(tasks, o["--candidates"]);
  nlohmann::json intended = nlohmann::json::array(), task_files = nlohmann::json::object();
  for (const auto& t : tasks) {
    intended.push_back(t.id);
    task_files[t.id] = {{"file", t.file}, {"sha256", file_sha256(t.file)}};
  }
  nlohmann::json config = {
      {"tasks", o["--tasks"]},
      {"candidates", o["--candidates"]},
      {"protocol", o["--protocol"]},
      {"protocol_rule", peer ? peer->to_json()
                             : nlohmann::json("every element of every output within the task's "
                                              "atol + rtol x |fp64 oracle|; NaN fails; every "
                                              "shape, --trials draws")},
      {"trials_per_shape", trials},
      {"timeout_seconds", timeout},
      {"timing", o["--time"] == "yes"
                     ? nlohmann::json{{"shape", "each task's first shape"},
                                      {"baseline", "the task's own kernel in " + o["--baselines"]},
                                      {"speedup", "baseline_us / candidate_us "
                                                  "from ABBA pairs"}}
                     : nlohmann::json("off")},
      {"nvcc_flags", candidate_nvcc_flags()},
      {"intended_tasks", intended},
      {"task_files", task_files}};
  std::unique_ptr<result_writer> writer;
  try {
    writer =
        std::make_unique<result_writer>(o["--out"], "eval", args, collect_environment(), config);
  } catch (const output_error& e) {
    err << "kernelgate: " << e.what() << "\n";
    return exit_code::bad_input;
  }
  // Compile every distinct source at once, on every core (or --jobs), through the cache.
  compile_options copt;
  copt.jobs = jobs;
  if (!o["--cache"].empty()) copt.cache_dir = o["--cache"];
  std::vector<fs::path> sources;
  for (const auto& p : pairs)
    if (!p.source.empty()) sources.push_back(p.source);
  const bool timed = o["--time"] == "yes";
  std::map<std::string, fs::path> baseline_source;
  if (timed)
    for (const auto& t : tasks)
      if (const auto f = fs::path(o["--baselines"]) / (t.id + ".cu"); fs::is_regular_file(f)) {
        baseline_source[t.id] = f;
        sources.push_back(f);
      }
  const auto compiled = compile_candidates(sources, copt);
  std::map<fs::path, const compile_result*> by_source;
  for (const auto& c : compiled)
    by_source[c.source] = &c;

  // The LibTorch reference of each task against its fp64 oracle (one draw per shape, the first
  // draw the candidates get): a task whose reference breaks its own tolerance cannot judge
  // anyone, and its candidates are INVALID_REFERENCE.
  std::map<std::string, std::string> invalid_reference;
  for (const auto& t : tasks)
    for (const auto& shape : t.shapes) {
      const auto in = make_task_inputs(t, shape, sandbox_options{}.seed);
      const auto oracle = run_task_oracle(t, shape, in);
      const auto ref = run_torch_reference(t, in);
      if (!ref) break; // no LibTorch reference for the op: nothing to invalidate
      if (!ref->error.empty()) {
        invalid_reference[t.id] = "the LibTorch reference failed to run: " + ref->error;
        break;
      }
      for (std::size_t k = 0; k < oracle.size(); ++k) {
        const auto type = t.outputs[k].type;
        const task_tolerance tol =
            t.tolerance.count(type) ? t.tolerance.at(type) : task_tolerance{};
        const auto c = compare_allclose(oracle[k], ref->outputs.at(k), tol.atol, tol.rtol,
                                        tolerance_side::reference);
        if (c.mismatches > 0 && !invalid_reference.count(t.id))
          invalid_reference[t.id] =
              "the LibTorch reference itself has " + std::to_string(c.mismatches) +
              " elements of output '" + t.outputs[k].name +
              "' outside the task's tolerance of the "
              "fp64 oracle on shape '" +
              shape.name + "' (max abs error " + std::to_string(c.max_abs_err) + ")";
      }
    }

  std::map<std::string, int> counts;
  bool interrupted = false;
  // KernelBench's eval_results.json layout, if asked for: {"<task>": [{sample_id, compiled,
  // correctness, metadata, runtime (ms, -1 when absent), runtime_stats}]}.
  nlohmann::json kb = nlohmann::json::object();
  out << std::left << std::setw(26) << "task" << std::setw(16) << "candidate" << std::setw(20)
      << "status"
      << "reason\n";
  // The options every pair shares; the CPU side of the next pairs' trials (inputs, oracles,
  // references) is prepared on other cores while the GPU runs the current one.
  trial_cache cache;
  sandbox_options shared;
  shared.self_exe = worker_binary();
  shared.trials = trials;
  shared.timeout_seconds = timeout;
  shared.time = timed;
  shared.peer = peer ? &*peer : nullptr;
  shared.cache = &cache;
  auto runnable = [&](std::size_t i) {
    return i < pairs.size() && !pairs[i].source.empty() &&
           !invalid_reference.count(pairs[i].task->id);
  };
  constexpr std::size_t lookahead = 2;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const auto& p = pairs[i];
    for (std::size_t j = i; j <= i + lookahead; ++j)
      if (runnable(j))
        for (const auto& k : planned_trials(*pairs[j].task, shared))
          cache.prefetch(k);
    candidate_verdict v;
    if (interrupted || stop_requested()) {
      interrupted = true;
      v.status = "MISSING";
      v.reason = "not evaluated: the run was interrupted";
    } else if (invalid_reference.count(p.task->id)) {
      v.status = "INVALID_REFERENCE";
      v.reason = invalid_reference.at(p.task->id);
    } else if (p.source.empty()) {
      v.status = "MISSING";
      v.reason = "no candidate for this task in " + o["--candidates"];
    } else {
      sandbox_options so = shared;
      so.work_dir = fs::path(o["--out"]) / "work" / (p.task->id + "." + p.candidate);
      if (const auto b = baseline_source.find(p.task->id); b != baseline_source.end())
        so.baseline = by_source.at(b->second);
      v = evaluate_candidate(*p.task, *by_source.at(p.source), so);
      cache.forget(planned_trials(*p.task, shared)); // what an early status left untaken
    }
    ++counts[v.status];
    nlohmann::json rec = {
        {"type", "evaluation"},
        {"id", "eval/" + p.task->id + "/" + (p.candidate.empty() ? "-" : p.candidate)},
        {"task", p.task->id},
        {"candidate", p.candidate},
        {"source", p.source.string()},
        {"status", v.status},
        {"status_reason", v.reason},
        {"detail", v.detail}};
    // The timing figures at the top of the record (the layout `kernelgate fastp` reads).
    for (const char* k : {"candidate_us", "baseline_us", "speedup", "speedup_ci95"})
      if (v.detail.contains(k)) rec[k] = v.detail[k];
    writer->append(rec);
    if (!p.source.empty()) {
      auto& samples = kb[p.task->id];
      nlohmann::json e = {{"sample_id", samples.size()},
                          {"compiled", v.status != "COMPILE_ERROR"},
                          {"correctness", v.status == "PASSED"},
                          {"metadata",
                           {{"kernelgate_status", v.status},
                            {"status_reason", v.reason},
                            {"candidate", p.candidate},
                            {"source", p.source.string()}}},
                          {"runtime", v.detail.contains("candidate_us")
                                          ? v.detail["candidate_us"].get<double>() / 1000.0
                                          : -1.0},
                          {"runtime_stats", nlohmann::json::object()}};
      samples.push_back(e);
    }
    std::string reason = v.reason.substr(0, 100);
    if (v.detail.contains("speedup"))
      reason = "speedup " + std::to_string(v.detail["speedup"].get<double>()).substr(0, 5) +
               " vs task kernel (" + v.detail.value("decision", std::string()) + "); " + reason;
    out << std::left << std::setw(26) << p.task->id << std::setw(16)
        << (p.candidate.empty() ? "-" : p.candidate) << std::setw(20) << v.status << reason << "\n";
  }
  nlohmann::json summary = {{"status", interrupted ? "interrupted" : "complete"},
                            {"pairs", pairs.size()},
                            {"by_status", counts}};
  const auto path = writer->finish(summary);
  if (!o["--kernelbench"].empty()) {
    // Written whole, then renamed: never a half-written file.
    const fs::path f = o["--kernelbench"], tmp = f.string() + ".tmp";
    std::ofstream(tmp) << kb.dump(2) << "\n";
    std::error_code ec;
    fs::rename(tmp, f, ec);
    if (ec) {
      err << "kernelgate: cannot write " << f.string() << ": " << ec.message() << "\n";
      return exit_code::bad_input;
    }
    out << "Wrote " << f.string() << " (KernelBench eval_results.json layout)\n";
  }
  out << "Statuses:";
  for (const auto& [k, n] : counts)
    out << " " << k << " " << n;
  out << "\nWrote " << path.string() << "\n";
  if (interrupted) return exit_code::interrupted;
  return counts.size() == 1 && counts.count("PASSED") ? exit_code::ok : exit_code::failures;
}

} // namespace kg
