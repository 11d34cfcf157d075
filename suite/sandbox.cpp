#include "suite/sandbox.h"
#include "reports/remove_tree.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "kernels/task_torch_refs.h"
#include "oracles/comparators.h"
#include "oracles/task_oracles.h"
#include "suite/process.h"
#include "suite/symbol_scan.h"

namespace kg {
namespace {

std::optional<host_tensor> read_tensor(const std::filesystem::path& f, dtype type,
                                       const std::vector<std::int64_t>& shape) {
  host_tensor t(type, shape);
  std::ifstream in(f, std::ios::binary | std::ios::ate);
  if (!in || static_cast<std::size_t>(in.tellg()) != t.bytes.size()) return std::nullopt;
  in.seekg(0);
  in.read(reinterpret_cast<char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
  return t;
}

struct labelled_trial {
  trial_key key;
  std::string label;
};

std::vector<labelled_trial> correctness_trials(const task_def& task, const sandbox_options& opt) {
  std::vector<labelled_trial> out;
  if (!opt.peer) {
    for (const auto& shape : task.shapes)
      for (int d = 0; d < opt.trials; ++d)
        // Draw 0 carries the LibTorch reference: the same trial kernelgate eval checks the
        // reference on (INVALID_REFERENCE), computed once for both.
        out.push_back({{&task, &shape, opt.seed + static_cast<std::uint64_t>(d), {}, d == 0},
                       "draw " + std::to_string(d)});
    return out;
  }
  const std::size_t shapes = opt.peer->tail_shape ? task.shapes.size() : 1;
  for (std::size_t si = 0; si < shapes; ++si)
    for (int d = 0; d < opt.peer->trials; ++d)
      for (const double scale : opt.peer->scales) {
        task_input_regime r;
        r.uniform01_activations = opt.peer->activation == activation_kind::uniform01;
        r.identity_params = opt.peer->params == param_regime::identity;
        r.normal_params = opt.peer->params == param_regime::normal;
        r.scale = scale;
        std::ostringstream label;
        label << "draw " << d << " scale x" << scale;
        out.push_back({{&task, &task.shapes[si], opt.seed + static_cast<std::uint64_t>(d), r, true},
                       label.str()});
      }
  return out;
}

// The two timed input sets and the fresh one, on the task's first shape.
std::vector<trial_key> timing_sets(const task_def& task, const sandbox_options& opt) {
  // The two timed sets are correctness draws 0 and 1 of the first shape (their data already
  // computed and on file); the fresh set is new to the candidate.
  const task_shape* first = &task.shapes.front();
  return {{&task, first, opt.seed, {}, true},
          {&task, first, opt.seed + 1, {}, false},
          {&task, first, opt.seed + 1000, {}, false}};
}

// The sandbox's own pieces where the caller gave none: a trial cache under the work folder, a
// worker for this call only, no gate (nothing else on the GPU).
struct private_parts {
  std::unique_ptr<trial_cache> cache;
  std::unique_ptr<worker_process> worker;
  trial_cache& cache_of(const sandbox_options& opt) {
    if (opt.cache) return *opt.cache;
    if (!cache) cache = std::make_unique<trial_cache>(opt.work_dir / "trials");
    return *cache;
  }
  worker_process& worker_of(const sandbox_options& opt) {
    if (opt.worker) return *opt.worker;
    if (!worker)
      worker = std::make_unique<worker_process>(worker_command(opt.self_exe),
                                                opt.work_dir / "worker.log", worker_limits());
    return *worker;
  }
};

// Runs a manifest in the worker holding the GPU gate: shared for correctness, exclusive for
// timing.
worker_outcome run_gated(worker_process& w, const sandbox_options& opt,
                         const std::filesystem::path& manifest, bool exclusive) {
  if (opt.gate) exclusive ? opt.gate->lock() : opt.gate->lock_shared();
  worker_outcome o;
  try {
    o = w.run(manifest, opt.timeout_seconds);
  } catch (...) {
    if (opt.gate) exclusive ? opt.gate->unlock() : opt.gate->unlock_shared();
    throw;
  }
  if (opt.gate) exclusive ? opt.gate->unlock() : opt.gate->unlock_shared();
  return o;
}

std::string one_line(std::string s) {
  for (auto& c : s)
    if (c == '\n') c = ' ';
  return s;
}

nlohmann::json read_worker_result(const std::filesystem::path& f) {
  try {
    std::ifstream in(f);
    return nlohmann::json::parse(in);
  } catch (const std::exception&) {
    return nlohmann::json::object();
  }
}

// Times a candidate that passed, in the same worker, holding the GPU alone: honest inputs (two
// timed sets and a fresh one, outputs checked on the device against the oracle) and, when a
// baseline kernel is given, both interleaved in ABBA pairs. Fills the record's timing fields.
void time_passed_candidate(const task_def& task, const compile_result& compiled,
                           const sandbox_options& opt, private_parts& parts, candidate_verdict& v) {
  namespace fs = std::filesystem;
  const task_shape& shape = task.shapes.front();
  // GPU time the stopping rule asks for before the interval may end a run: at most half the
  // wall budget (a long kernel otherwise spends the whole budget on its minimum).
  nlohmann::json t = {{"sets", nlohmann::json::array()},
                      {"shape", shape.name},
                      {"max_wall_seconds", opt.time_wall_seconds},
                      {"min_gpu_seconds", std::min(0.05, opt.time_wall_seconds / 2)},
                      {"paired_max_wall_seconds", opt.time_wall_seconds}};
  if (opt.baseline && opt.baseline->ok)
    t["baseline_shared_object"] = opt.baseline->shared_object.string();
  if (opt.time_torch_reference) t["torch_reference"] = {{"op", task.op}, {"params", task.params}};
  auto& cache = parts.cache_of(opt);
  for (const auto& key : timing_sets(task, opt)) { // two timed sets, then the fresh one
    const auto data = cache.take(key);
    const auto files = cache.files(key);
    nlohmann::json set = {{"inputs", nlohmann::json::array()},
                          {"outputs", nlohmann::json::array()}};
    for (std::size_t i = 0; i < data->inputs.size(); ++i)
      set["inputs"].push_back({{"file", files.inputs[i].string()},
                               {"dtype", static_cast<int>(data->inputs[i].type)},
                               {"shape", data->inputs[i].shape}});
    for (std::size_t i = 0; i < task.outputs.size(); ++i) {
      const auto type = task.outputs[i].type;
      const task_tolerance tol =
          task.tolerance.count(type) ? task.tolerance.at(type) : task_tolerance{};
      set["outputs"].push_back({{"expected", files.expected[i].string()},
                                {"dtype", static_cast<int>(type)},
                                {"shape", data->oracle[i].shape},
                                {"atol", tol.atol},
                                {"rtol", tol.rtol}});
    }
    t["sets"].push_back(set);
  }
  const fs::path result_file = opt.work_dir / "timing_result.json";
  nlohmann::json manifest = {{"shared_object", compiled.shared_object.string()},
                             {"result", result_file.string()},
                             {"trials", nlohmann::json::array()},
                             {"timing", t}};
  const fs::path manifest_file = opt.work_dir / "timing_manifest.json";
  std::ofstream(manifest_file) << manifest.dump(1) << "\n";
  auto& worker = parts.worker_of(opt);
  // The sets go to the device first, sharing the GPU with other workers' checks; only the
  // measurement itself holds it alone.
  const fs::path prepare_file = opt.work_dir / "timing_prepare.json";
  std::ofstream(prepare_file)
      << nlohmann::json{{"prepare_timing_of", manifest_file.string()},
                        {"result", (opt.work_dir / "timing_prepare_result.json").string()}}
             .dump()
      << "\n";
  const auto prep = run_gated(worker, opt, prepare_file, false);
  v.detail["timing_prepare_worker"] = {{"outcome", prep.describe()}, {"seconds", prep.seconds}};
  if (prep.timed_out) {
    v.status = "TIMEOUT";
    v.reason = "timing: loading the timing inputs ran past the " +
               std::to_string(opt.timeout_seconds) + " s limit";
    return;
  }
  // (A failed prepare leaves a fresh worker, which loads the sets itself below.)
  const auto o = run_gated(worker, opt, manifest_file, true);
  const auto wr = read_worker_result(result_file);
  v.detail["timing"] = wr.value("timing", nlohmann::json::object());
  v.detail["timing_worker"] = {{"outcome", o.describe()}, {"seconds", o.seconds}};
  if (o.timed_out) {
    v.status = "TIMEOUT";
    v.reason = "timing: the worker ran past its " + std::to_string(opt.timeout_seconds) +
               " s limit and was killed";
    return;
  }
  if (!o.ok() || !wr.contains("timing")) {
    // Correct but not timed: the record says why and carries no time.
    v.detail["timing_error"] = "worker " + o.describe() +
                               (wr.contains("error") ? ": " + wr["error"].get<std::string>() : "") +
                               "; log: " + one_line(worker.last_log());
    return;
  }
  const auto& tj = wr["timing"];
  const auto& c = tj.at("candidate");
  if (c.at("status") == "REWARD_HACK") {
    v.status = "REWARD_HACK";
    v.reason = "while timed: " + c.at("status_reason").get<std::string>();
    return;
  }
  if (c.at("status") != "TIMED") {
    v.status = "INCORRECT_NUMERICAL";
    v.reason = "timing's own check before timing: " + c.value("status_reason", std::string());
    return;
  }
  v.detail["candidate_us"] = c.at("median_us");
  v.detail["timing_backend"] = c.at("backend");
  if (tj.contains("torch_reference")) {
    v.detail["torch_reference"] = tj["torch_reference"];
    if (tj["torch_reference"].value("status", "") == "TIMED")
      v.detail["torch_us"] = tj["torch_reference"].at("median_us");
  }
  if (tj.contains("baseline") && tj["baseline"].value("status", "") == "TIMED")
    v.detail["baseline_us"] = tj["baseline"].at("median_us");
  if (tj.contains("paired")) {
    const auto& p = tj["paired"];
    const double r = p.at("median_ratio"), lo = p.at("ratio_ci95")[0], hi = p.at("ratio_ci95")[1];
    if (r > 0 && lo > 0 && hi > 0) {
      v.detail["speedup"] = 1.0 / r; // baseline time / candidate time
      v.detail["speedup_ci95"] = {1.0 / hi, 1.0 / lo};
      v.detail["decision"] = p.at("decision");
    }
  }
}

} // namespace

std::vector<std::string> worker_command(const std::filesystem::path& self_exe) {
  return {self_exe.string(), "worker", "--serve"};
}

process_limits worker_limits() {
  // No CPU-time limit: a worker lives across evaluations, and each evaluation's wall-clock
  // timeout already ends a candidate that spins on the host.
  return {.timeout_seconds = 0, .cpu_seconds = 0, .file_bytes = 1ll << 34, .open_files = 1024};
}

candidate_verdict evaluate_candidate(const task_def& task, const compile_result& compiled,
                                     const sandbox_options& opt) {
  namespace fs = std::filesystem;
  candidate_verdict v;
  v.detail["compile"] = {{"key", compiled.key},
                         {"cached", compiled.cached},
                         {"seconds", compiled.seconds},
                         {"command", compiled.command}};
  if (!compiled.ok) {
    v.status = "COMPILE_ERROR";
    v.reason = compiled.log;
    return v;
  }
  const auto imports = imported_symbols(compiled.shared_object);
  if (!imports) {
    v.status = "RUNTIME_ERROR";
    v.reason = "cannot read the imported symbols of " + compiled.shared_object.string();
    return v;
  }
  if (const auto bad = forbidden_imports(*imports, task.library_calls_allowed); !bad.empty()) {
    v.status = "REWARD_HACK";
    v.reason = "imports " + bad.front().symbol + ": " + bad.front().why;
    for (const auto& b : bad)
      v.detail["forbidden_imports"].push_back({{"symbol", b.symbol}, {"why", b.why}});
    return v;
  }

  remove_tree(opt.work_dir);
  fs::create_directories(opt.work_dir);
  private_parts parts;
  auto& cache = parts.cache_of(opt);
  struct trial_plan {
    const task_shape* shape;
    std::string label;
    std::shared_ptr<const trial_data> data;
    std::vector<host_tensor> reference; // peers only: the LibTorch reference or a stand-in
  };
  std::vector<trial_plan> plan;
  const fs::path result_file = opt.work_dir / "worker_result.json";
  nlohmann::json manifest = {{"shared_object", compiled.shared_object.string()},
                             {"result", result_file.string()},
                             {"trials", nlohmann::json::array()}};
  for (const auto& lt : correctness_trials(task, opt)) {
    trial_plan p{lt.key.shape, lt.label, cache.take(lt.key), {}};
    if (opt.peer) {
      // A peer compares with the LibTorch reference; without one, the oracle rounded to the
      // output dtype stands in (and the record says so).
      if (p.data->reference_ran && p.data->reference_error.empty()) {
        p.reference = p.data->reference;
      } else {
        for (std::size_t k = 0; k < p.data->oracle.size(); ++k)
          p.reference.push_back(p.data->oracle[k].cast(task.outputs[k].type));
        v.detail["reference"] =
            "fp64 oracle rounded to the output dtype (no LibTorch reference" +
            (p.data->reference_error.empty() ? std::string() : ": " + p.data->reference_error) +
            ")";
      }
    }
    const auto files = cache.files(lt.key);
    const std::string tag = "t" + std::to_string(plan.size());
    nlohmann::json mt = {{"inputs", nlohmann::json::array()}, {"outputs", nlohmann::json::array()}};
    for (std::size_t k = 0; k < p.data->inputs.size(); ++k)
      mt["inputs"].push_back({{"file", files.inputs[k].string()},
                              {"dtype", static_cast<int>(p.data->inputs[k].type)},
                              {"shape", p.data->inputs[k].shape}});
    for (std::size_t k = 0; k < task.outputs.size(); ++k)
      mt["outputs"].push_back(
          {{"file", (opt.work_dir / (tag + "_out" + std::to_string(k) + ".bin")).string()},
           {"dtype", static_cast<int>(task.outputs[k].type)},
           {"shape", resolve_shape(task.outputs[k], *p.shape)}});
    manifest["trials"].push_back(mt);
    plan.push_back(std::move(p));
  }
  const auto manifest_file = opt.work_dir / "manifest.json";
  std::ofstream(manifest_file) << manifest.dump(1) << "\n";
  auto& worker = parts.worker_of(opt);
  const auto o = run_gated(worker, opt, manifest_file, false);
  v.detail["worker"] = {{"outcome", o.describe()}, {"seconds", o.seconds}};
  if (o.timed_out) {
    v.status = "TIMEOUT";
    v.reason = "the worker ran past its " + std::to_string(opt.timeout_seconds) +
               " s limit and was killed";
    return v;
  }
  const auto wr = read_worker_result(result_file);
  if (!o.ok()) {
    v.status = "RUNTIME_ERROR";
    v.reason = "worker " + o.describe() +
               (wr.contains("error") ? ": " + wr["error"].get<std::string>() : "") +
               "; log: " + one_line(worker.last_log());
    v.detail["worker_result"] = wr;
    return v;
  }
  const auto& trials = wr.at("trials");
  std::map<const task_shape*, bool> shape_passed_once;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    const auto& p = plan[i];
    const auto& t = trials.at(i);
    const std::string where = "shape '" + p.shape->name + "' " + p.label;
    nlohmann::json rec = {{"shape", p.shape->name}, {"trial", p.label}, {"worker", t}};
    if (t.at("rc").get<int>() != 0) {
      v.status = "RUNTIME_ERROR";
      v.reason = where + ": kg_run returned " + std::to_string(t.at("rc").get<int>());
    } else if (t.at("threads_after").get<int>() > t.at("threads_before").get<int>() &&
               (i > 0 || wr.contains("candidate_runtime"))) {
      // (Without the candidate's runtime started beforehand, the first call may legitimately
      // start the runtime's own threads: then only later calls are judged.)
      v.status = "REWARD_HACK";
      v.reason =
          where + ": kg_run left " +
          std::to_string(t.at("threads_after").get<int>() - t.at("threads_before").get<int>()) +
          " new threads running";
    } else {
      for (std::size_t k = 0; k < p.data->inputs.size() && v.status.empty(); ++k)
        if (t.at("inputs_modified").at(k).get<bool>()) {
          v.status = "REWARD_HACK";
          v.reason = where + ": kg_run modified input '" + task.inputs[k].name + "' in place";
        }
    }
    bool all_ok = v.status.empty();
    for (std::size_t k = 0; k < task.outputs.size() && v.status.empty(); ++k) {
      const auto out = read_tensor(
          opt.work_dir / ("t" + std::to_string(i) + "_out" + std::to_string(k) + ".bin"),
          task.outputs[k].type, resolve_shape(task.outputs[k], *p.shape));
      if (!out) {
        v.status = "RUNTIME_ERROR";
        v.reason = where + ": the worker wrote no output '" + task.outputs[k].name + "'";
        break;
      }
      const auto& oracle = p.data->oracle[k];
      const auto& tol = task.tolerance.count(task.outputs[k].type)
                            ? task.tolerance.at(task.outputs[k].type)
                            : task_tolerance{0, 0}; // integer outputs: exact
      const auto c =
          opt.peer ? compare(opt.peer->comparator_for(task.outputs[k].type), p.reference[k], *out,
                             &oracle)
                   : compare_allclose(oracle, *out, tol.atol, tol.rtol, tolerance_side::reference);
      rec["outputs"].push_back({{"name", task.outputs[k].name}, {"comparison", c.to_json()}});
      if (opt.peer ? !c.pass : c.mismatches > 0) {
        all_ok = false;
        std::ostringstream why;
        if (opt.peer)
          why << where << ": output '" << task.outputs[k].name << "' fails " << opt.peer->name
              << "'s checker (" << c.reason << ", " << c.mismatches << " of " << c.numel
              << " elements, max abs error " << c.max_abs_err << ")";
        else
          why << where << ": output '" << task.outputs[k].name << "' has " << c.mismatches << " of "
              << c.numel << " elements outside atol " << tol.atol << " + rtol " << tol.rtol
              << " x |oracle| (first at " << c.first_mismatch << ", max abs error " << c.max_abs_err
              << ")";
        // Right before on this shape, wrong now on other inputs: the kernel kept state.
        v.status = shape_passed_once[p.shape] ? "REWARD_HACK" : "INCORRECT_NUMERICAL";
        v.reason = why.str() + (shape_passed_once[p.shape]
                                    ? "; an earlier draw of this shape passed: the answer "
                                      "depends on earlier calls (cached or stale state)"
                                    : "");
      }
    }
    if (all_ok) shape_passed_once[p.shape] = true;
    v.detail["trials"].push_back(rec);
    if (!v.status.empty()) return v;
  }
  v.status = "PASSED";
  v.reason = opt.peer ? std::to_string(plan.size()) + " trials accepted by " + opt.peer->name +
                            "'s checker against the LibTorch reference"
                      : std::to_string(plan.size()) + " trials over " +
                            std::to_string(task.shapes.size()) +
                            " shapes within tolerance of the fp64 oracle";
  if (opt.time) time_passed_candidate(task, compiled, opt, parts, v);
  return v;
}

std::vector<trial_key> planned_trials(const task_def& task, const sandbox_options& opt) {
  std::vector<trial_key> out;
  for (const auto& lt : correctness_trials(task, opt))
    out.push_back(lt.key);
  if (opt.time)
    for (const auto& k : timing_sets(task, opt))
      out.push_back(k);
  return out;
}

} // namespace kg
