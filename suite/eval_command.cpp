#include "suite/eval_command.h"
#include "reports/remove_tree.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <mutex>
#include <thread>
#include <unistd.h>

#include "base/rng.h"
#include "base/sha256.h"
#include "gpu/device_info.h"
#include "kernels/task_torch_refs.h"
#include "oracles/comparators.h"
#include "oracles/protocol.h"
#include "oracles/task_oracles.h"
#include "reports/environment.h"
#include "reports/json_input.h"
#include "reports/result_writer.h"
#include "sandbox/candidate_compiler.h"
#include "sandbox/sandbox.h"
#include "sandbox/torch_time_store.h"
#include "sandbox/trial_cache.h"
#include "sandbox/worker_pool.h"
#include "suite/exit_codes.h"
#include "suite/progress_meter.h"
#include "suite/shard_plan.h"
#include "suite/task_catalog.h"
#include "suite/worker_paths.h"
#include "timing/interrupt.h"
#include "timing/phase_log.h"

namespace kg {
namespace {

namespace fs = std::filesystem;

struct pair_plan {
  const task_def* task;
  std::string candidate;
  fs::path source; // empty: no candidate for the task
};

// The pair's record id (and its item in a shard plan).
std::string pair_id(const pair_plan& p) {
  return "eval/" + p.task->id + "/" + (p.candidate.empty() ? "-" : p.candidate);
}

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

// A folder removed with everything in it when the run ends.
class scratch_dir {
public:
  explicit scratch_dir(fs::path p) : p_(std::move(p)) { fs::create_directories(p_); }
  ~scratch_dir() { remove_tree(p_); }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  const fs::path& path() const { return p_; }

private:
  fs::path p_;
};

} // namespace

std::string default_baselines_dir() {
  return KG_TASK_KERNELS_DIR;
}

namespace {

// What eval runs, read and checked before anything is written: the protocol, the seed, the
// tasks and their files' hashes, the (task, candidate) pairs, the device and the configuration
// the result records.
struct eval_plan {
  std::optional<protocol> peer;
  bool seed_given = false;
  std::uint64_t seed = 0;
  std::vector<task_def> tasks;
  std::vector<pair_plan> pairs;
  nlohmann::json task_files, config;
  device_info dev;
};

// Phase 1: load. Returns an exit code (bad input, no GPU) and prints one line, or fills `plan`.
std::optional<int> load_eval_plan(const eval_options& o, eval_plan& plan, std::ostream& err) {
  auto& peer = plan.peer;
  auto& tasks = plan.tasks;
  // strict: the task's tolerance against the fp64 oracle. A peer's name: its checker as
  // oracles/protocol.h models it, against the LibTorch reference.
  if (o.protocol != "strict") {
    peer = find_protocol(o.protocol);
    if (!peer) {
      std::string known = "strict";
      for (const auto n : protocol_names())
        if (n != "strict") known += ", " + std::string(n);
      err << "kernelgate: unknown protocol '" << printable(o.protocol) << "' (known: " << known
          << ")\n";
      return exit_code::bad_input;
    }
  }
  // The run's seed: secret (drawn from the OS, published in the summary only after the run, so
  // no input can be generated ahead), or --seed to reproduce a published run.
  plan.seed_given = o.seed.has_value();
  plan.seed = plan.seed_given ? *o.seed : secret_seed();
  try {
    tasks = load_tasks(o.tasks);
  } catch (const task_error& e) {
    err << "kernelgate: " << printable(e.what(), 400) << "\n";
    return exit_code::bad_input;
  }
  for (const auto& t : tasks)
    if (!find_task_oracle(t.op)) {
      err << "kernelgate: " << t.file << ": /op: no fp64 oracle for op '" << t.op << "'\n";
      return exit_code::bad_input;
    }
  if (!fs::is_directory(o.candidates)) {
    err << "kernelgate: --candidates '" << printable(o.candidates) << "' is not a folder\n";
    return exit_code::bad_input;
  }
  // KERNELGATE_FAKE_DEVICE=1 (with KERNELGATE_WORKER naming a stand-in worker): the CPU tests
  // drive the whole pipeline -- pairs, worker pool, gate, records in order -- without a GPU.
  const char* fake = std::getenv("KERNELGATE_FAKE_DEVICE");
  const bool fake_device = fake && std::string(fake) == "1" && std::getenv("KERNELGATE_WORKER");
  plan.dev = query_device(0);
  if (!plan.dev.available && !fake_device) {
    err << "kernelgate: no GPU to evaluate on: " << plan.dev.reason << "\n";
    return exit_code::unavailable;
  }
  plan.pairs = find_pairs(tasks, o.candidates);
  nlohmann::json intended = nlohmann::json::array();
  plan.task_files = nlohmann::json::object();
  for (const auto& t : tasks) {
    intended.push_back(t.id);
    plan.task_files[t.id] = {{"file", t.file}, {"sha256", file_sha256(t.file)}};
  }
  plan.config = {
      {"tasks", o.tasks},
      {"candidates", o.candidates},
      {"protocol", o.protocol},
      {"protocol_rule", peer ? peer->to_json()
                             : nlohmann::json("every element of every output within the task's "
                                              "atol + rtol x |fp64 oracle|; NaN fails; every "
                                              "shape, --trials draws")},
      {"trials_per_shape", o.trials},
      {"draws_per_shape", "the larger of --trials and the task's input regimes; draw 0 is N(0,1), "
                          "the others cover every regime the task declares, in an order drawn "
                          "from the seed"},
      {"seed", plan.seed_given
                   ? nlohmann::json(plan.seed)
                   : nlohmann::json("secret: drawn from the OS, recorded in the summary "
                                    "after the run")},
      {"timeout_seconds", o.timeout},
      {"timing",
       o.time == "yes"
           ? nlohmann::json{{"shape", "each task's first shape"},
                            {"baseline", "the task's own kernel in " + o.baselines},
                            {"speedup", "baseline_us / candidate_us "
                                        "from ABBA pairs"},
                            {"torch_reference",
                             o.torch_time == "no"
                                 ? nlohmann::json("off")
                                 : nlohmann::json("the task's LibTorch reference on the GPU, same "
                                                  "timer and inputs, once per task (" +
                                                  o.torch_time +
                                                  "); speedup_vs_torch = "
                                                  "torch_us / candidate_us")}}
           : nlohmann::json("off")},
      {"nvcc_flags", candidate_nvcc_flags()},
      {"intended_tasks", intended},
      {"task_files", plan.task_files}};
  return std::nullopt;
}

// The compiled candidates and task kernels of a run (by_source points into results).
struct compiled_sources {
  compile_options options;
  std::vector<compile_result> results;
  std::map<fs::path, const compile_result*> by_source;
  std::map<std::string, fs::path> baseline_source; // the task kernel timed against, by task
};

// Phase 2: compile every distinct source at once, on every core (or --jobs), through the cache:
// the candidates, and the task kernels when timing.
void compile_eval_sources(const eval_plan& plan, const eval_options& o, compiled_sources& c) {
  c.options.jobs = o.jobs;
  if (!o.cache.empty()) c.options.cache_dir = o.cache;
  std::vector<fs::path> sources;
  for (const auto& p : plan.pairs)
    if (!p.source.empty()) sources.push_back(p.source);
  if (o.time == "yes")
    for (const auto& t : plan.tasks)
      if (const auto f = fs::path(o.baselines) / (t.id + ".cu"); fs::is_regular_file(f)) {
        c.baseline_source[t.id] = f;
        sources.push_back(f);
      }
  c.results = compile_candidates(sources, c.options);
  for (const auto& r : c.results)
    c.by_source[r.source] = &r;
}

// Phase 4 (with --kernelbench): the results in KernelBench's layouts. Returns an exit code when a
// file cannot be written.
std::optional<int>
write_kernelbench_files(const fs::path& file_name, const std::vector<task_def>& tasks,
                        const nlohmann::json& kb,
                        const std::map<std::string, std::vector<double>>& kb_baseline_ms,
                        const std::string& gpu, std::ostream& out, std::ostream& err) {
  // KernelBench's layout needs numeric problem ids: a task is its 1-based position in the task
  // list (the id is in each sample's metadata). Beside it, the task kernels' times in
  // baseline_time_torch.json's layout under "level1", named "<position>_<task>.py" -- so
  // `kernelgate fastp FILE --baseline BASE` and KernelBench's own scoring read the pair. The
  // times are medians (KernelBench's are means): the baseline's samples in the ABBA pairs, the
  // candidate's honest samples. Each file is written whole, then renamed.
  const fs::path& f = file_name;
  const fs::path base = f.parent_path() / (f.stem().string() + ".baseline.json");
  std::error_code mk;
  if (!f.parent_path().empty()) fs::create_directories(f.parent_path(), mk);
  nlohmann::json results = nlohmann::json::object(), level = nlohmann::json::object();
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const std::string pid = std::to_string(i + 1);
    if (kb.contains(tasks[i].id)) results[pid] = kb.at(tasks[i].id);
    if (const auto it = kb_baseline_ms.find(tasks[i].id); it != kb_baseline_ms.end()) {
      auto v = it->second;
      std::sort(v.begin(), v.end());
      const double mid =
          v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
      level[pid + "_" + tasks[i].id + ".py"] = {{"mean", mid},
                                                {"num_trials", v.size()},
                                                {"hardware", gpu},
                                                {"device", "cuda:0"},
                                                {"statistic", "median (kernelgate)"}};
    }
  }
  for (const auto& [file, doc] :
       {std::pair{f, results}, std::pair{base, nlohmann::json{{"level1", level}}}}) {
    const fs::path tmp = file.string() + ".tmp";
    std::ofstream(tmp) << doc.dump(2) << "\n";
    std::error_code ec;
    fs::rename(tmp, file, ec);
    if (ec) {
      err << "kernelgate: cannot write " << file.string() << ": " << ec.message() << "\n";
      return exit_code::bad_input;
    }
  }
  out << "Wrote " << f.string() << " (KernelBench eval_results.json layout, problem id = the "
      << "task's position) and " << base.string() << " (its baseline: the task kernels' times)\n";
  return std::nullopt;
}

// The `evaluation` record of a pair; `torch`: the task's LibTorch reference time, if any.
nlohmann::json evaluation_record(const pair_plan& p, const candidate_verdict& v,
                                 const nlohmann::json* torch) {
  nlohmann::json rec = {
      {"type", "evaluation"},        {"id", pair_id(p)},
      {"task", p.task->id},          {"candidate", p.candidate},
      {"source", p.source.string()}, {"status", std::string(status_name(*v.status))},
      {"status_reason", v.reason},   {"detail", v.detail}};
  if (v.interrupted) rec["interrupted"] = true; // not evaluated; a --resume evaluates it
  // The timing figures at the top of the record (the layout `kernelgate fastp` reads).
  for (const char* k : {"candidate_us", "baseline_us", "speedup", "speedup_ci95"})
    if (v.detail.contains(k)) rec[k] = v.detail[k];
  // Against the LibTorch reference: separate measurements (not ABBA), so no interval here;
  // both medians and their intervals are in the record.
  if (torch && v.detail.contains("candidate_us")) {
    rec["torch_reference"] = *torch;
    const auto& r = torch->at("reference");
    if (r.value("status", "") == "TIMED") {
      rec["torch_us"] = r.at("median_us");
      rec["speedup_vs_torch"] =
          r.at("median_us").get<double>() / v.detail["candidate_us"].get<double>();
    }
  }
  return rec;
}

// The pair as one sample of KernelBench's eval_results.json: compiled is false only for
// COMPILE_ERROR; runtime in ms, the median of the candidate's honest samples, -1 when untimed.
nlohmann::json kernelbench_sample(const pair_plan& p, const candidate_verdict& v,
                                  std::size_t sample_id) {
  return {{"sample_id", sample_id},
          {"compiled", v.status != eval_status::compile_error},
          {"correctness", v.status == eval_status::passed},
          {"metadata",
           {{"kernelgate_status", std::string(status_name(*v.status))},
            {"status_reason", v.reason},
            {"candidate", p.candidate},
            {"source", p.source.string()}}},
          {"runtime", v.detail.contains("candidate_us")
                          ? v.detail["candidate_us"].get<double>() / 1000.0
                          : -1.0},
          {"runtime_stats", nlohmann::json::object()}};
}

} // namespace

namespace {

// --shard and --resume: keeps the shard's pairs, minus those a resumed folder already recorded
// (their records come back through the writer), and writes shard.json. Returns an exit code and
// one line on err, or fills `writer`, `kept` (the resumed records' statuses) and `part`.
std::optional<int> open_eval_output(const eval_options& o, const std::vector<std::string>& args,
                                    eval_plan& plan, std::unique_ptr<result_writer>& writer,
                                    std::map<std::string, int>& kept, std::ostream& err) {
  auto bad = [&](const std::string& why) {
    err << "kernelgate: " << printable(why, 400) << "\n";
    return std::optional<int>(exit_code::bad_input);
  };
  shard_spec part;
  if (!o.shard.empty()) {
    std::string why;
    const auto s = parse_shard_spec(o.shard, why);
    if (!s) return bad("--shard: " + why);
    part = *s;
  }
  if ((!o.shard.empty() || !o.resume.empty()) && !plan.seed_given)
    return bad(std::string(o.resume.empty() ? "--shard" : "--resume") +
               " needs --seed N: every part of one evaluation must draw the same inputs (a "
               "secret seed differs from process to process)");
  if (!o.resume.empty() && o.out != "kg-out/eval" && fs::path(o.out) != fs::path(o.resume))
    return bad("--resume writes into the folder it resumes; drop --out");
  std::vector<shard_item> items;
  for (const auto& p : plan.pairs) // a task's trials are shared by its candidates: its set-up
    items.push_back({pair_id(p), 1, p.task->id, 1});
  std::vector<std::string> ids, assigned;
  for (const auto& it : items)
    ids.push_back(it.id);
  std::vector<pair_plan> mine;
  for (const auto i : items_of_shard(items, part)) {
    mine.push_back(plan.pairs[i]);
    assigned.push_back(items[i].id);
  }
  const auto m =
      make_shard_manifest("eval", part, std::move(ids), std::move(assigned), plan.config);
  if (!o.shard.empty()) plan.config["shard"] = {{"index", part.index}, {"count", part.count}};
  const fs::path dir = o.resume.empty() ? fs::path(o.out) : fs::path(o.resume);
  try {
    if (o.resume.empty()) {
      writer = std::make_unique<result_writer>(dir, "eval", args, m.environment, plan.config);
    } else {
      const auto was = read_shard_manifest(dir);
      if (was.command != "eval" || was.identity != m.identity || !(was.spec == part))
        return bad("cannot resume " + dir.string() +
                   ": a different evaluation (tasks, candidates, protocol, seed, options or "
                   "shard differ)");
      int torn = 0;
      writer = std::make_unique<result_writer>(result_writer::resume_tag{}, dir, "eval", args,
                                               m.environment, plan.config, &torn);
    }
    write_shard_manifest(dir, m);
  } catch (const std::runtime_error& e) { // output_error, an unreadable shard.json
    return bad(std::string(o.resume.empty() ? "" : "cannot resume: ") + e.what());
  }
  std::set<std::string> done;
  for (const auto& r : writer->records())
    if (r.value("type", "") == "evaluation" && r.contains("id")) {
      done.insert(r["id"].get<std::string>());
      ++kept[r.value("status", std::string("?"))];
    }
  if (!o.resume.empty())
    err << "kernelgate: resuming " << dir.string() << ": " << done.size()
        << " pairs kept, the rest run\n";
  plan.pairs.clear();
  for (auto& p : mine)
    if (!done.count(pair_id(p))) plan.pairs.push_back(std::move(p));
  return std::nullopt;
}

} // namespace

int run_eval_command(const eval_options& o, const std::vector<std::string>& args, std::ostream& out,
                     std::ostream& err) {
  eval_plan plan;
  if (const auto rc = load_eval_plan(o, plan, err)) return *rc;
  std::unique_ptr<result_writer> writer;
  std::map<std::string, int> counts; // by status, the resumed records' included
  if (const auto rc = open_eval_output(o, args, plan, writer, counts, err)) return *rc;
  const auto& peer = plan.peer;
  const auto& tasks = plan.tasks;
  const auto& pairs = plan.pairs;
  const auto& task_files = plan.task_files;
  const auto& dev = plan.dev;
  const bool seed_given = plan.seed_given;
  const std::uint64_t seed = plan.seed;
  const int trials = o.trials;
  int workers = o.workers;
  const double timeout = o.timeout, time_budget = o.time_budget;
  compiled_sources compiled;
  compile_eval_sources(plan, o, compiled);
  const auto& copt = compiled.options;
  const auto& baseline_source = compiled.baseline_source;
  const auto& by_source = compiled.by_source;
  const bool timed = o.time == "yes";

  // The LibTorch reference's GPU time, once per task: from the store beside the compile cache
  // (--torch-time cached, KernelBench's once-per-GPU baseline), else timed with the task's first
  // candidate that is timed. Read and written under commit_m.
  const std::string torch_mode = o.torch_time;
  std::string store_why;
  torch_time_store torch_store((copt.cache_dir.empty() ? default_cache_dir() : copt.cache_dir) /
                                   "torch_reference_times.json",
                               &store_why);
  if (!store_why.empty()) err << "kernelgate: warning: " << store_why << "\n";
  std::map<std::string, std::string> torch_key;
  std::map<std::string, nlohmann::json> torch_entry; // by task: measured in this run or cached
  std::map<std::string, bool> torch_in_flight;
  if (timed && torch_mode != "no")
    for (const auto& t : tasks) {
      torch_key[t.id] = torch_time_store::key(task_files[t.id]["sha256"].get<std::string>(),
                                              dev.name, torch_version());
      if (torch_mode != "cached") continue;
      if (auto e = torch_store.find(torch_key[t.id]); !e.is_null()) {
        e["source"] =
            "cached in " +
            (copt.cache_dir.empty() ? default_cache_dir() : fs::path(copt.cache_dir)).string();
        torch_entry[t.id] = e;
      }
    }

  // Scratch for the tensors the workers read and write: memory-backed where the machine has it
  // (tens of MB per trial), removed at the end.
  scratch_dir scratch(o.scratch.empty() ? memory_scratch(writer->dir(), "kernelgate-eval")
                                        : fs::path(o.scratch));
  trial_cache cache(scratch.path() / "trials");
  std::map<std::string, std::string> invalid_reference;
  std::mutex invalid_m;
  bool interrupted = false;
  // KernelBench's eval_results.json layout, if asked for: {"<task>": [{sample_id, compiled,
  // correctness, metadata, runtime (ms, -1 when absent), runtime_stats}]}.
  nlohmann::json kb = nlohmann::json::object();
  std::map<std::string, std::vector<double>> kb_baseline_ms; // the task kernel's times, by task
  out << std::left << std::setw(26) << "task" << std::setw(16) << "candidate" << std::setw(20)
      << "status"
      << "reason\n";
  // The options every pair shares.
  gpu_gate gate;
  sandbox_options shared;
  shared.self_exe = worker_binary();
  shared.trials = trials;
  shared.seed = seed;
  shared.timeout_seconds = timeout;
  shared.time = timed;
  shared.time_wall_seconds = time_budget;
  shared.peer = peer ? &*peer : nullptr;
  shared.cache = &cache;
  shared.gate = &gate;
  // The LibTorch reference of each task against its fp64 oracle (one draw per shape, the first
  // draw the candidates get): a task whose reference breaks its own tolerance cannot judge
  // anyone, and its candidates are INVALID_REFERENCE. Checked when the task's first pair comes
  // up, on the cached trial data.
  auto reference_keys = [&](const task_def& t) {
    std::vector<trial_key> keys;
    task_input_regime normal; // the strict protocol's draw 0: the same trial, computed once
    if (!peer && !t.regimes.empty()) normal.strict_regime = 0;
    for (const auto& shape : t.shapes)
      keys.push_back({&t, &shape, shared.seed, normal, true});
    return keys;
  };
  std::map<std::string, std::once_flag> reference_checked;
  for (const auto& t : tasks)
    (void)reference_checked[t.id];
  auto check_reference = [&](const task_def& t) {
    std::string why;
    for (const auto& key : reference_keys(t)) {
      const auto d = cache.take(key);
      if (!d->reference_ran) break; // no LibTorch reference for the op: nothing to invalidate
      if (!d->reference_error.empty()) {
        why = "the LibTorch reference failed to run: " + d->reference_error;
        break;
      }
      for (std::size_t k = 0; k < d->oracle.size() && why.empty(); ++k) {
        const auto type = t.outputs[k].type;
        const task_tolerance tol =
            t.tolerance.count(type) ? t.tolerance.at(type) : task_tolerance{};
        const auto c = compare_allclose(d->oracle[k], d->reference.at(k), tol.atol, tol.rtol,
                                        tolerance_side::reference);
        if (c.mismatches > 0)
          why = "the LibTorch reference itself has " + std::to_string(c.mismatches) +
                " elements of output '" + t.outputs[k].name +
                "' outside the task's tolerance of the fp64 oracle on shape '" + key.shape->name +
                "' (max abs error " + std::to_string(c.max_abs_err) + ")";
      }
      if (!why.empty()) break;
    }
    std::lock_guard<std::mutex> l(invalid_m);
    if (!why.empty()) invalid_reference[t.id] = why;
  };
  // Pairs run on `workers` threads, each with its own long-lived worker process: correctness
  // runs overlap on the GPU, timing holds it alone (gpu_gate). Records are written in pair order
  // as soon as every pair before them is done, each streamed at once.
  if (workers == 0)
    workers = static_cast<int>(std::clamp(std::thread::hardware_concurrency() / 4, 1u, 4u));
  std::map<std::string, int> pairs_left;
  for (const auto& p : pairs)
    ++pairs_left[p.task->id];
  std::vector<std::optional<candidate_verdict>> verdicts(pairs.size());
  progress_meter meter(out, progress_bar_wanted(out, o.no_progress), pairs.size());
  std::size_t committed = 0;
  std::mutex commit_m;
  auto commit_ready = [&] { // holds commit_m
    for (; committed < pairs.size() && verdicts[committed]; ++committed) {
      const auto& p = pairs[committed];
      const auto& v = *verdicts[committed];
      ++counts[std::string(status_name(*v.status))];
      const auto te = torch_entry.find(p.task->id);
      const nlohmann::json rec =
          evaluation_record(p, v, te == torch_entry.end() ? nullptr : &te->second);
      writer->append(rec);
      if (!p.source.empty()) {
        auto& samples = kb[p.task->id];
        const auto e = kernelbench_sample(p, v, samples.size());
        samples.push_back(e);
        if (v.detail.contains("baseline_us"))
          kb_baseline_ms[p.task->id].push_back(v.detail["baseline_us"].get<double>() / 1000.0);
      }
      std::string reason = v.reason.substr(0, 100);
      if (v.detail.contains("speedup"))
        reason = "speedup " + std::to_string(v.detail["speedup"].get<double>()).substr(0, 5) +
                 " vs task kernel (" + v.detail.value("decision", std::string()) + "); " + reason;
      std::ostringstream line;
      line << std::left << std::setw(26) << p.task->id << " " << std::setw(15)
           << (p.candidate.empty() ? "-" : p.candidate) << " " << std::setw(19)
           << status_name(*v.status) << " " << reason;
      meter.done(line.str());
    }
  };
  auto runnable = [&](std::size_t i) { return i < pairs.size() && !pairs[i].source.empty(); };
  // How far ahead the CPU side is queued: the pairs of the next `workers` + 1 tasks (a task's
  // trials are shared by all its candidates), fewer once the cached trials pass a memory budget
  // (an eighth of the machine's memory; the files sit in memory-backed scratch too).
  const std::size_t tasks_ahead = static_cast<std::size_t>(workers) + 1;
  const std::size_t memory_budget = [] {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * page / 8
                                 : std::size_t{2} << 30;
  }();
  std::atomic<std::size_t> next{0};
  std::atomic<bool> stopped{false};
  const fs::path logs = writer->dir() / "workers";
  fs::create_directories(logs);
  auto pair_thread = [&](int n) {
    worker_process worker(worker_command(shared.self_exe),
                          logs / ("worker-" + std::to_string(n) + ".log"), worker_limits());
    worker.expect_ready(true);
    for (std::size_t i; (i = next++) < pairs.size();) {
      const auto& p = pairs[i];
      meter.start(p.task->id + (p.candidate.empty() ? "" : " / " + p.candidate));
      scoped_phase pair_phase("eval.pair");
      // The CPU side of this pair and the next ones (inputs, oracles, references), on the
      // cache's pool while the GPU runs this one.
      {
        scoped_phase phase("eval.prefetch");
        std::size_t tasks_seen = 0;
        const task_def* last = nullptr;
        for (std::size_t j = i; j < pairs.size(); ++j) {
          if (pairs[j].task != last && ++tasks_seen > tasks_ahead) break;
          if (pairs[j].task != last && tasks_seen > 2 && cache.resident_bytes() > memory_budget)
            break;
          last = pairs[j].task;
          if (!runnable(j)) continue;
          for (const auto& k : reference_keys(*pairs[j].task))
            cache.prefetch(k);
          for (const auto& k : planned_trials(*pairs[j].task, shared))
            cache.prefetch(k);
        }
      }
      candidate_verdict v;
      bool asked_torch = false;
      const auto not_evaluated = [&] {
        stopped = true;
        v = candidate_verdict{};
        v.status = eval_status::missing;
        v.reason = "not evaluated: the run was interrupted";
        v.interrupted = true;
      };
      if (stopped || stop_requested()) {
        not_evaluated();
      } else if (p.source.empty()) {
        v.status = eval_status::missing;
        v.reason = "no candidate for this task in " + o.candidates;
      } else {
        {
          scoped_phase phase("eval.check_reference");
          std::call_once(reference_checked.at(p.task->id), check_reference, *p.task);
        }
        std::string invalid;
        {
          std::lock_guard<std::mutex> l(invalid_m);
          if (const auto it = invalid_reference.find(p.task->id); it != invalid_reference.end())
            invalid = it->second;
        }
        if (!invalid.empty()) {
          v.status = eval_status::invalid_reference;
          v.reason = invalid;
        } else {
          sandbox_options so = shared;
          so.work_dir = scratch.path() / "pairs" / std::to_string(i);
          so.worker = &worker;
          if (const auto b = baseline_source.find(p.task->id); b != baseline_source.end())
            so.baseline = by_source.at(b->second);
          if (torch_key.count(p.task->id)) {
            std::lock_guard<std::mutex> l(commit_m);
            if (!torch_entry.count(p.task->id) && !torch_in_flight[p.task->id])
              so.time_torch_reference = asked_torch = torch_in_flight[p.task->id] = true;
          }
          try {
            v = evaluate_candidate(*p.task, *by_source.at(p.source), so);
          } catch (const std::exception& e) {
            // A fault of the harness, not the candidate's: this pair says so, the others run on.
            v = candidate_verdict{};
            v.status = eval_status::runtime_error;
            v.reason = std::string("kernelgate failed evaluating this pair: ") + e.what();
          }
          remove_tree(so.work_dir); // its outputs were read; the trial files stay shared
          // A failure reached while we were being stopped may be the stop's doing (the job's
          // SIGTERM reaches nvcc and the worker too): unknown, not failed.
          if (v.status != eval_status::passed && stop_requested()) not_evaluated();
        }
      }
      if (!v.status) { // (every path of evaluate_candidate decides; a harness fault if not)
        v.status = eval_status::runtime_error;
        v.reason = "kernelgate reached no verdict for this pair";
      }
      std::lock_guard<std::mutex> l(commit_m);
      if (asked_torch) {
        // Not timed (the candidate failed first): the task's next candidate asks again.
        torch_in_flight[p.task->id] = false;
        if (v.detail.contains("torch_reference")) {
          nlohmann::json e = {{"reference", v.detail["torch_reference"]},
                              {"measured_at", utc_timestamp()},
                              {"gpu", dev.name},
                              {"torch", torch_version()}};
          if (e["reference"].value("status", "") == "TIMED")
            torch_store.put(torch_key.at(p.task->id), e);
          e["source"] = "measured in this run, with candidate '" + p.candidate + "'";
          torch_entry[p.task->id] = e;
        }
      }
      if (--pairs_left[p.task->id] == 0) {
        auto keys = planned_trials(*p.task, shared);
        const auto ref = reference_keys(*p.task);
        keys.insert(keys.end(), ref.begin(), ref.end());
        cache.forget(keys);
      }
      verdicts[i] = std::move(v);
      commit_ready();
    }
  };
  {
    std::vector<std::jthread> threads;
    for (int n = 0; n < workers; ++n)
      threads.emplace_back(pair_thread, n);
  }
  meter.finish();
  interrupted = stopped;
  if (std::string why; !torch_store.save(&why))
    err << "kernelgate: warning: the LibTorch reference times were not kept: " << why << "\n";
  nlohmann::json summary = {
      {"status", interrupted ? "interrupted" : "complete"},
      {"pairs", writer->record_count()},
      {"by_status", counts},
      {"seed",
       {{"value", seed},
        {"source", seed_given ? "--seed" : "secret (OS)"},
        {"reproduce", "kernelgate eval ... --seed " + std::to_string(seed)}}}};
  const auto path = writer->finish(summary);
  if (!o.kernelbench.empty())
    if (const auto rc =
            write_kernelbench_files(o.kernelbench, tasks, kb, kb_baseline_ms, dev.name, out, err))
      return *rc;
  out << "Statuses:";
  for (const auto& [k, n] : counts)
    out << " " << k << " " << n;
  out << "\nWrote " << path.string() << "\n";
  if (interrupted) return exit_code::interrupted;
  return counts.size() == 1 && counts.count("PASSED") ? exit_code::ok : exit_code::failures;
}

} // namespace kg
