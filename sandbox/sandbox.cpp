#include "sandbox/sandbox.h"
#include "reports/remove_tree.h"
#include "sandbox/sandbox_internal.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <fstream>
#include <future>
#include <optional>
#include <sstream>

#include "base/rng.h"
#include "kernels/task_torch_refs.h"
#include "oracles/comparators.h"
#include "oracles/task_oracles.h"
#include "sandbox/process.h"
#include "sandbox/symbol_scan.h"
#include "sandbox/verdict_labels.h"
#include "timing/phase_log.h"

namespace kg {
namespace sandbox_detail {

// The strict protocol's draws: per shape, at least one draw per input regime the task declares
// (draw 0 is N(0,1) and carries the LibTorch reference), the others in an order drawn from the
// run's seed; about half of the later draws run on a busy stream.
std::vector<labelled_trial> strict_trials(const task_def& task, const sandbox_options& opt) {
  std::vector<labelled_trial> out;
  const int regimes = std::max<int>(1, static_cast<int>(task.regimes.size()));
  const int draws = std::max(opt.trials, regimes);
  rng plan(opt.seed, stream_id(task.id + "/plan"));
  for (const auto& shape : task.shapes) {
    std::vector<int> order; // regimes 1.. in a random order
    for (int k = 1; k < regimes; ++k)
      order.push_back(k);
    for (std::size_t i = order.size(); i > 1; --i)
      std::swap(order[i - 1], order[plan.below(i)]);
    for (int d = 0; d < draws; ++d) {
      const int regime = d == 0 || order.empty() ? 0 : order[(d - 1) % order.size()];
      task_input_regime r;
      r.strict_regime = task.regimes.empty() ? -1 : regime;
      const std::string name =
          task.regimes.empty() ? "normal" : task.regimes[static_cast<std::size_t>(regime)].name();
      out.push_back({{&task, &shape, opt.seed + static_cast<std::uint64_t>(d), r, d == 0},
                     "draw " + std::to_string(d) + " (" + name + ")",
                     name,
                     d > 0 && plan.below(2) == 0});
    }
  }
  return out;
}

std::vector<labelled_trial> correctness_trials(const task_def& task, const sandbox_options& opt) {
  if (!opt.peer) return strict_trials(task, opt);
  std::vector<labelled_trial> out;
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
                       label.str(),
                       "peer",
                       false});
      }
  return out;
}

// The input sets of honest timing, on the task's first shape: three timed sets -- correctness
// draw 0, a new draw, and a variant of the new draw that shares its first elements -- then a
// variant of draw 0, then the fresh set no timed call sees (last).
std::vector<trial_key> timing_sets(const task_def& task, const sandbox_options& opt) {
  const task_shape* first = &task.shapes.front();
  task_input_regime normal;
  normal.strict_regime = task.regimes.empty() ? -1 : 0;
  trial_key a{&task, first, opt.seed, normal, true};
  trial_key b{&task, first, opt.seed + 1000, normal, false};
  trial_key b_variant = b, a_variant{&task, first, opt.seed, normal, false};
  b_variant.variant = opt.seed ^ 0x76617231ull;
  a_variant.variant = opt.seed ^ 0x76617232ull;
  return {a, b, b_variant, a_variant, {&task, first, opt.seed + 2000, normal, false}};
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
    worker->expect_ready(true);
    return *worker;
  }
};

// Runs a manifest in the worker holding the GPU gate: shared for correctness, exclusive for
// timing.
worker_outcome run_gated(worker_process& w, const sandbox_options& opt,
                         const std::filesystem::path& manifest, bool exclusive) {
  if (opt.gate) {
    scoped_phase p(exclusive ? "gate.wait_exclusive" : "gate.wait_shared");
    exclusive ? opt.gate->lock() : opt.gate->lock_shared();
  }
  worker_outcome o;
  try {
    scoped_phase p(exclusive ? "gate.held_exclusive" : "gate.held_shared");
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

// A trial as a worker manifest lists it: its input files, and where each output goes.
nlohmann::json trial_entry(const task_def& task, const trial_key& key, const trial_data& data,
                           const trial_files& files, const std::filesystem::path& out_prefix,
                           bool busy) {
  nlohmann::json mt = {
      {"inputs", nlohmann::json::array()}, {"outputs", nlohmann::json::array()}, {"busy", busy}};
  for (std::size_t k = 0; k < data.inputs.size(); ++k)
    mt["inputs"].push_back({{"file", files.inputs[k].string()},
                            {"dtype", static_cast<int>(data.inputs[k].type)},
                            {"shape", data.inputs[k].shape}});
  for (std::size_t k = 0; k < task.outputs.size(); ++k)
    mt["outputs"].push_back({{"file", out_prefix.string() + "_out" + std::to_string(k) + ".bin"},
                             {"dtype", static_cast<int>(task.outputs[k].type)},
                             {"shape", resolve_shape(task.outputs[k], *key.shape)}});
  return mt;
}

std::optional<std::vector<host_tensor>> read_outputs(const task_def& task, const trial_key& key,
                                                     const std::filesystem::path& out_prefix) {
  std::vector<host_tensor> outs;
  if (!read_outputs_into(task, key, out_prefix, outs)) return std::nullopt;
  return outs;
}

bool read_outputs_into(const task_def& task, const trial_key& key,
                       const std::filesystem::path& out_prefix, std::vector<host_tensor>& outs) {
  outs.resize(task.outputs.size());
  for (std::size_t k = 0; k < task.outputs.size(); ++k) {
    auto& t = outs[k];
    t.type = task.outputs[k].type;
    t.shape = resolve_shape(task.outputs[k], *key.shape);
    std::size_t bytes = dtype_size(t.type);
    for (const auto d : t.shape)
      bytes *= static_cast<std::size_t>(d);
    // A buffer of the size already there is read over as it is: no zero fill, no new pages.
    if (t.bytes.size() != bytes) t.bytes = std::vector<std::byte>(bytes);
    std::ifstream in(out_prefix.string() + "_out" + std::to_string(k) + ".bin",
                     std::ios::binary | std::ios::ate);
    if (!in || static_cast<std::size_t>(in.tellg()) != bytes) return false;
    in.seekg(0);
    in.read(reinterpret_cast<char*>(t.bytes.data()), static_cast<std::streamsize>(bytes));
    if (!in) return false;
  }
  return true;
}

std::string bytes_of(const std::vector<host_tensor>& outs) {
  std::string b;
  for (const auto& t : outs)
    b.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  return b;
}

task_tolerance tolerance_of(const task_def& task, dtype type, const std::string& regime) {
  for (const auto& r : task.regimes)
    if (r.name() == regime)
      if (const auto it = r.tolerance.find(type); it != r.tolerance.end())
        return {it->second.atol, it->second.rtol};
  return task.tolerance.count(type) ? task.tolerance.at(type) : task_tolerance{0, 0};
}

// Where an output is worst: its index, the oracle's value and the kernel's, and the inputs that
// produced it (the same element for inputs shaped like the output, else the whole row whose
// last dimension reduces into it: its extremes, mean and first values).
// The condition term of output k, if the trial has one (computed on first use).
const host_tensor* condition_term(const trial_data& data, std::size_t k) {
  if (!data.has_condition_term()) return nullptr;
  const auto& extra = data.extra_atol();
  return extra.size() > k && !extra[k].shape.empty() ? &extra[k] : nullptr;
}

nlohmann::json worst_element(const task_def& task, const trial_data& data, std::size_t k,
                             const host_tensor& out, const task_tolerance& tol) {
  const auto& oracle = data.oracle[k];
  const host_tensor* extra = condition_term(data, k);
  std::int64_t worst = -1;
  double excess = -1;
  // (dtypes dispatched once: per element, this was a third of an audit's judging)
  with_element_reader(oracle, [&](auto oracle_at) {
    with_element_reader(out, [&](auto out_at) {
      for (std::int64_t i = 0; i < oracle.numel(); ++i) {
        const double r = oracle_at(i), c = out_at(i);
        const double bound = tol.atol + (extra ? extra->at(i) : 0.0) + tol.rtol * std::fabs(r);
        const double e = std::isfinite(c) ? std::fabs(r - c) - bound : INFINITY;
        if (e > excess) {
          excess = e;
          worst = i;
        }
      }
    });
  });
  if (worst < 0) return nlohmann::json::object();
  auto num = [](double v) {
    return std::isfinite(v) ? nlohmann::json(v)
                            : nlohmann::json(std::isnan(v) ? "nan"
                                             : v > 0       ? "inf"
                                                           : "-inf");
  };
  nlohmann::json j = {{"output", task.outputs[k].name},
                      {"index", worst},
                      {"expected", num(oracle.at(worst))},
                      {"got", num(out.at(worst))},
                      {"tolerance", tol.atol + (extra ? extra->at(worst) : 0.0) +
                                        tol.rtol * std::fabs(oracle.at(worst))}};
  for (std::size_t q = 0; q < data.inputs.size(); ++q) {
    const auto& x = data.inputs[q];
    const std::string name = task.inputs.at(q).name;
    if (x.numel() == oracle.numel()) {
      j["inputs"][name] = num(x.at(worst));
    } else if (!x.shape.empty() && x.numel() == oracle.numel() * x.shape.back()) {
      const std::int64_t c = x.shape.back(), row = worst;
      double lo = INFINITY, hi = -INFINITY, sum = 0;
      std::int64_t at_hi = 0;
      nlohmann::json head = nlohmann::json::array();
      for (std::int64_t i = 0; i < c; ++i) {
        const double v = x.at(row * c + i);
        if (i < 4) head.push_back(num(v));
        if (v > hi) at_hi = i;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
        sum += v;
      }
      j["inputs"][name] = {{"row", row},     {"first", head},   {"min", num(lo)},
                           {"max", num(hi)}, {"argmax", at_hi}, {"mean", num(sum / c)},
                           {"cols", c}};
    }
  }
  return j;
}

// The outputs of one call against the protocol: the fp64 oracle within the task's (regime's)
// tolerance plus the condition term, or a peer's checker against its reference.
judgement judge(const task_def& task, const trial_key& key, const trial_data& data,
                const std::vector<host_tensor>& reference, const std::string& regime,
                const std::vector<host_tensor>& outs, const sandbox_options& opt, bool evidence,
                bool statistics) {
  judgement j;
  for (std::size_t k = 0; k < task.outputs.size(); ++k) {
    const auto& oracle = data.oracle[k];
    const auto tol = tolerance_of(task, task.outputs[k].type, regime);
    // Without statistics (the audit): pass or fail from the first element outside, and the whole
    // comparison only for a failure whose evidence is asked for (its sentence, its worst element).
    if (!opt.peer && !statistics) {
      std::int64_t bad =
          first_allclose_mismatch(oracle, outs[k], tol.atol, tol.rtol, tolerance_side::reference);
      const host_tensor* extra = nullptr;
      if (bad >= 0 && (extra = condition_term(data, k)))
        bad = first_allclose_mismatch(oracle, outs[k], tol.atol, tol.rtol,
                                      tolerance_side::reference, extra);
      if (bad < 0) continue;
      if (!j.pass) continue; // (an earlier output is the failure reported)
      if (!evidence) {
        j.pass = false;
        std::ostringstream why;
        why << "output '" << task.outputs[k].name << "' is outside atol " << tol.atol
            << (extra ? " + condition term" : "") << " + rtol " << tol.rtol
            << " x |oracle| (first at " << bad << "; not counted further)";
        j.why = why.str();
        continue;
      }
    }
    // The condition term only where the task's own tolerance is not enough.
    const host_tensor* extra = nullptr;
    auto c = opt.peer
                 ? compare(opt.peer->comparator_for(task.outputs[k].type), reference[k], outs[k],
                           &oracle)
                 : compare_allclose(oracle, outs[k], tol.atol, tol.rtol, tolerance_side::reference);
    if (!opt.peer && c.mismatches > 0 && (extra = condition_term(data, k)))
      c = compare_allclose(oracle, outs[k], tol.atol, tol.rtol, tolerance_side::reference, extra);
    j.comparisons.push_back({{"name", task.outputs[k].name}, {"comparison", c.to_json()}});
    if (!(opt.peer ? !c.pass : c.mismatches > 0) || !j.pass) continue;
    j.pass = false;
    std::ostringstream why;
    if (opt.peer)
      why << "output '" << task.outputs[k].name << "' fails " << opt.peer->name << "'s checker ("
          << c.reason << ", " << c.mismatches << " of " << c.numel << " elements, max abs error "
          << c.max_abs_err << ")";
    else
      why << "output '" << task.outputs[k].name << "' has " << c.mismatches << " of " << c.numel
          << " elements outside atol " << tol.atol << (extra ? " + condition term" : "")
          << " + rtol " << tol.rtol << " x |oracle| (first at " << c.first_mismatch
          << ", max abs error " << c.max_abs_err << ")";
    j.why = why.str();
    if (evidence) j.worst = worst_element(task, data, k, outs[k], tol);
    (void)key;
  }
  return j;
}

const std::vector<host_tensor>& peer_reference_view(const task_def& task, const trial_data& data,
                                                    std::vector<host_tensor>& storage) {
  if (data.reference_ran && data.reference_error.empty()) return data.reference;
  storage = peer_reference(task, data);
  return storage;
}

// A peer compares with the LibTorch reference; without one, the oracle rounded to the output
// dtype stands in.
std::vector<host_tensor> peer_reference(const task_def& task, const trial_data& data) {
  if (data.reference_ran && data.reference_error.empty()) return data.reference;
  std::vector<host_tensor> out;
  for (std::size_t k = 0; k < data.oracle.size(); ++k)
    out.push_back(data.oracle[k].cast(task.outputs[k].type));
  return out;
}

constexpr int reruns_per_process = 6;

// Re-runs a wrong call's inputs: back to back in the same worker (which keeps the candidate
// loaded), then as the first calls of a fresh worker; judges every output.
rerun_evidence rerun_wrong_call(const task_def& task, const compile_result& compiled,
                                const sandbox_options& opt, private_parts& parts,
                                const trial_key& key, const std::string& regime,
                                const std::string& original_bits, nlohmann::json& detail) {
  namespace fs = std::filesystem;
  auto& cache = parts.cache_of(opt);
  const auto data = cache.take(key);
  const auto files = cache.files(key);
  const auto reference = opt.peer ? peer_reference(task, *data) : std::vector<host_tensor>{};
  rerun_evidence e;
  e.original_bits = original_bits;
  for (const bool fresh : {false, true}) {
    const std::string tag = fresh ? "rerun_fresh" : "rerun_same";
    nlohmann::json manifest = {{"shared_object", compiled.shared_object.string()},
                               {"result", (opt.work_dir / (tag + ".json")).string()},
                               {"fresh", fresh},
                               {"trials", nlohmann::json::array()}};
    for (int i = 0; i < reruns_per_process; ++i)
      manifest["trials"].push_back(
          trial_entry(task, key, *data, files, opt.work_dir / (tag + std::to_string(i)), false));
    const fs::path mf = opt.work_dir / (tag + "_manifest.json");
    std::ofstream(mf) << manifest.dump() << "\n";
    std::unique_ptr<worker_process> own;
    worker_process* w = &parts.worker_of(opt);
    if (fresh) {
      own = std::make_unique<worker_process>(worker_command(opt.self_exe),
                                             opt.work_dir / "fresh_worker.log", worker_limits());
      own->expect_ready(true);
      w = own.get();
    }
    const auto o = run_gated(*w, opt, mf, false);
    auto& calls = fresh ? e.fresh_worker : e.same_worker;
    for (int i = 0; o.ok() && i < reruns_per_process; ++i) {
      const auto outs = read_outputs(task, key, opt.work_dir / (tag + std::to_string(i)));
      if (!outs) break;
      calls.push_back(
          {judge(task, key, *data, reference, regime, *outs, opt).pass, bytes_of(*outs)});
    }
    int right = 0;
    for (const auto& c : calls)
      right += c.right ? 1 : 0;
    detail[fresh ? "fresh_worker" : "same_worker"] = {
        {"outcome", o.describe()}, {"calls", calls.size()}, {"right", right}};
  }
  return e;
}

// The status of a wrong answer: re-run, then labelled (sandbox/verdict_labels.h).
void label_wrong(const task_def& task, const compile_result& compiled, const sandbox_options& opt,
                 private_parts& parts, const trial_key& key, const std::string& regime,
                 const std::string& where, const judgement& j, const std::string& original_bits,
                 candidate_verdict& v) {
  nlohmann::json detail;
  const auto e = rerun_wrong_call(task, compiled, opt, parts, key, regime, original_bits, detail);
  const auto l = label_wrong_answer(e);
  v.status = l.status;
  v.reason = where + ": " + j.why + (l.reason.empty() ? "" : "; " + l.reason);
  detail["label"] = std::string(status_name(l.status));
  v.detail["rerun"] = detail;
  if (!j.worst.empty()) v.detail["worst_element"] = j.worst;
  v.detail["failing_regime"] = regime;
}

// The timing manifest of a candidate (written before its correctness run, which loads and
// verifies its input sets ahead, sharing the GPU): honest timing on the task's first shape over
// rotating verified input sets, then ABBA pairs against the baseline when one is given.
std::filesystem::path write_timing_manifest(const task_def& task, const compile_result& compiled,
                                            const sandbox_options& opt, private_parts& parts) {
  namespace fs = std::filesystem;
  scoped_phase phase("sandbox.timing_manifest");
  const task_shape& shape = task.shapes.front();
  // GPU time the stopping rule asks for before the interval may end a run: at most half the
  // wall budget (a long kernel otherwise spends the whole budget on its minimum).
  nlohmann::json t = {{"sets", nlohmann::json::array()},
                      {"shape", shape.name},
                      {"slots", 2},
                      {"seed", opt.seed ^ 0x74696d65ull},
                      {"max_wall_seconds", opt.time_wall_seconds},
                      {"min_gpu_seconds", std::min(0.05, opt.time_wall_seconds / 2)},
                      {"paired_max_wall_seconds", opt.time_wall_seconds}};
  if (opt.baseline && opt.baseline->ok)
    t["baseline_shared_object"] = opt.baseline->shared_object.string();
  if (opt.time_torch_reference) t["torch_reference"] = {{"op", task.op}, {"params", task.params}};
  auto& cache = parts.cache_of(opt);
  const auto keys = timing_sets(task, opt);
  for (const auto& key : keys)
    cache.prefetch(key);
  for (const auto& key : keys) { // the timed sets, then the fresh one
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
  nlohmann::json manifest = {{"shared_object", compiled.shared_object.string()},
                             {"result", (opt.work_dir / "timing_result.json").string()},
                             {"trials", nlohmann::json::array()},
                             {"timing", t}};
  const fs::path manifest_file = opt.work_dir / "timing_manifest.json";
  std::ofstream(manifest_file) << manifest.dump(1) << "\n";
  return manifest_file;
}

// Times a candidate that passed, in the same worker, holding the GPU alone (the sets were loaded
// and verified by its correctness run; a worker started since prepares them itself): every call
// checked. Fills the record's timing fields.
void time_passed_candidate(const task_def& task, const compile_result& compiled,
                           const sandbox_options& opt, private_parts& parts,
                           const std::filesystem::path& manifest_file, candidate_verdict& v) {
  auto& worker = parts.worker_of(opt);
  const auto result_file = opt.work_dir / "timing_result.json";
  const auto keys = timing_sets(task, opt);
  const auto o = run_gated(worker, opt, manifest_file, true);
  const auto wr = read_worker_result(result_file);
  v.detail["timing"] = wr.value("timing", nlohmann::json::object());
  v.detail["timing_worker"] = {{"outcome", o.describe()}, {"seconds", o.seconds}};
  if (o.timed_out) {
    v.status = eval_status::timeout;
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
  const std::string cs = c.value("status", "");
  if (cs == "INCORRECT") {
    // Wrong on an input set verified before timing: as wrong as a failing draw, and labelled the
    // same way (the set re-run here and in a fresh worker).
    const auto set = static_cast<std::size_t>(tj.value("failed_input_set", 0));
    const auto& key = keys.at(std::min(set, keys.size() - 1));
    judgement j;
    j.why = c.value("status_reason", std::string());
    label_wrong(task, compiled, opt, parts, key, "normal",
                "timing's input set " + std::to_string(set), j, std::string(), v);
    v.reason = "timing's own check before timing: " + v.reason;
    return;
  }
  if (cs == "REWARD_HACK") {
    const std::string what = c.value("status_reason", std::string());
    const auto l = label_timed_failure(tj.value("diagnosis", nlohmann::json::object()), what);
    v.status = l.status;
    v.reason = l.reason;
    return;
  }
  if (cs != "TIMED") {
    v.status = eval_status::incorrect_numerical;
    v.reason = "timing's own check before timing: " + c.value("status_reason", std::string());
    return;
  }
  if (tj.contains("paired_check_failure")) {
    const auto l =
        label_timed_failure(tj.value("diagnosis", nlohmann::json::object()),
                            "in the ABBA pairs: " + tj["paired_check_failure"].get<std::string>());
    v.status = l.status;
    v.reason = l.reason;
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

} // namespace sandbox_detail

using namespace sandbox_detail;

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
    v.status = eval_status::compile_error;
    v.reason = compiled.log;
    return v;
  }
  const auto imports = imported_symbols(compiled.shared_object);
  if (!imports) {
    v.status = eval_status::runtime_error;
    v.reason = "cannot read the imported symbols of " + compiled.shared_object.string();
    return v;
  }
  if (const auto bad = forbidden_imports(*imports, task.library_calls_allowed); !bad.empty()) {
    v.status = eval_status::reward_hack;
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
    labelled_trial lt;
    std::shared_ptr<const trial_data> data;
    std::vector<host_tensor> reference; // peers only: the LibTorch reference or a stand-in
  };
  std::vector<trial_plan> plan;
  const fs::path result_file = opt.work_dir / "worker_result.json";
  // "fresh": the worker loads the candidate anew, whatever it served before.
  nlohmann::json manifest = {{"shared_object", compiled.shared_object.string()},
                             {"result", result_file.string()},
                             {"fresh", true},
                             {"trials", nlohmann::json::array()}};
  // Timing's input sets are loaded and verified at the end of the correctness run (the GPU
  // shared), so that the timing run holds it alone only to measure.
  std::filesystem::path timing_manifest;
  if (opt.time) {
    timing_manifest = write_timing_manifest(task, compiled, opt, parts);
    manifest["prepare_timing_of"] = timing_manifest.string();
  }
  const auto trials_planned = correctness_trials(task, opt);
  std::optional<scoped_phase> phase(std::in_place, "sandbox.take_trials");
  for (const auto& lt : trials_planned) // on the cache's pool, all at once
    cache.prefetch(lt.key);
  for (const auto& lt : trials_planned) {
    trial_plan p{lt, cache.take(lt.key), {}};
    if (opt.peer) {
      p.reference = peer_reference(task, *p.data);
      if (!(p.data->reference_ran && p.data->reference_error.empty()))
        v.detail["reference"] =
            "fp64 oracle rounded to the output dtype (no LibTorch reference" +
            (p.data->reference_error.empty() ? std::string() : ": " + p.data->reference_error) +
            ")";
    }
    const auto files = cache.files(lt.key);
    manifest["trials"].push_back(trial_entry(
        task, lt.key, *p.data, files, opt.work_dir / ("t" + std::to_string(plan.size())), lt.busy));
    plan.push_back(std::move(p));
  }
  const auto manifest_file = opt.work_dir / "manifest.json";
  std::ofstream(manifest_file) << manifest.dump(1) << "\n";
  phase.reset();
  auto& worker = parts.worker_of(opt);
  const auto o = run_gated(worker, opt, manifest_file, false);
  v.detail["worker"] = {{"outcome", o.describe()}, {"seconds", o.seconds}};
  if (o.not_started) { // the harness's fault: unknown, not failed
    v.status = eval_status::missing;
    v.reason = "not judged: the worker " + o.describe();
    return v;
  }
  if (o.timed_out) {
    v.status = eval_status::timeout;
    v.reason = "the worker ran past its " + std::to_string(opt.timeout_seconds) +
               " s limit and was killed";
    return v;
  }
  const auto wr = read_worker_result(result_file);
  if (o.replied && o.code == 4) { // the harness's fault (a full scratch): unknown, not failed
    v.status = eval_status::missing;
    v.reason = "not judged: the worker could not write an output: " +
               wr.value("error", std::string("(no detail)"));
    return v;
  }
  if (!o.ok()) {
    v.status = eval_status::runtime_error;
    v.reason = "worker " + o.describe() +
               (wr.contains("error") ? ": " + wr["error"].get<std::string>() : "") +
               "; log: " + one_line(worker.last_log());
    v.detail["worker_result"] = wr;
    return v;
  }
  const auto& trials = wr.value("trials", nlohmann::json::array());
  if (trials.size() < plan.size()) {
    v.status = eval_status::runtime_error;
    v.reason = "the worker reported " + std::to_string(trials.size()) + " of " +
               std::to_string(plan.size()) + " trials";
    v.detail["worker_result"] = wr;
    return v;
  }
  std::map<std::string, int> regimes_checked;
  phase.emplace("sandbox.judge");
  // Every trial's outputs read and judged at once, a few threads at a time (an output can be tens
  // of MB compared in fp64); the verdict below still takes them in order and stops at the first
  // failing one.
  struct judged {
    std::optional<std::vector<host_tensor>> outs;
    judgement j;
  };
  auto judge_trial = [&](std::size_t i) {
    judged r;
    r.outs = read_outputs(task, plan[i].lt.key, opt.work_dir / ("t" + std::to_string(i)));
    if (r.outs)
      r.j = judge(task, plan[i].lt.key, *plan[i].data, plan[i].reference, plan[i].lt.regime,
                  *r.outs, opt);
    return r;
  };
  std::vector<std::future<judged>> judging;
  {
    constexpr std::size_t at_once = 4;
    std::deque<std::future<judged>*> running;
    judging.resize(plan.size());
    for (std::size_t i = 0; i < plan.size() && i < trials.size(); ++i) {
      if (running.size() == at_once) {
        running.front()->wait();
        running.pop_front();
      }
      judging[i] = std::async(std::launch::async, judge_trial, i);
      running.push_back(&judging[i]);
    }
  }
  for (std::size_t i = 0; i < plan.size(); ++i) {
    const auto& p = plan[i];
    const auto& t = trials.at(i);
    const std::string where = "shape '" + p.lt.key.shape->name + "' " + p.lt.label;
    nlohmann::json rec = {{"shape", p.lt.key.shape->name},
                          {"trial", p.lt.label},
                          {"regime", p.lt.regime},
                          {"worker", t}};
    if (t.at("rc").get<int>() != 0) {
      v.status = eval_status::runtime_error;
      v.reason = where + ": kg_run returned " + std::to_string(t.at("rc").get<int>());
    } else if (t.at("threads_after").get<int>() > t.at("threads_before").get<int>() &&
               (i > 0 || wr.contains("candidate_runtime"))) {
      // (Without the candidate's runtime started beforehand, the first call may legitimately
      // start the runtime's own threads: then only later calls are judged.)
      v.status = eval_status::reward_hack;
      v.reason =
          where + ": kg_run left " +
          std::to_string(t.at("threads_after").get<int>() - t.at("threads_before").get<int>()) +
          " new threads running";
    } else {
      for (std::size_t k = 0; k < p.data->inputs.size() && !v.status; ++k)
        if (t.at("inputs_modified").at(k).get<bool>()) {
          v.status = eval_status::reward_hack;
          v.reason = where + ": kg_run modified input '" + task.inputs[k].name + "' in place";
        }
    }
    if (!v.status) {
      auto r = judging.at(i).valid() ? judging[i].get() : judge_trial(i);
      const auto& outs = r.outs;
      if (!outs) {
        v.status = eval_status::runtime_error;
        v.reason = where + ": the worker wrote no output";
      } else {
        const auto& j = r.j;
        rec["outputs"] = j.comparisons;
        if (!j.pass) {
          phase.emplace("sandbox.label");
          label_wrong(task, compiled, opt, parts, p.lt.key, p.lt.regime, where, j, bytes_of(*outs),
                      v);
        } else {
          ++regimes_checked[p.lt.regime];
        }
      }
    }
    v.detail["trials"].push_back(rec);
    if (v.status) return v;
  }
  v.detail["regimes_passed"] = regimes_checked;
  v.status = eval_status::passed;
  v.reason = opt.peer ? std::to_string(plan.size()) + " trials accepted by " + opt.peer->name +
                            "'s checker against the LibTorch reference"
                      : std::to_string(plan.size()) + " trials over " +
                            std::to_string(task.shapes.size()) + " shapes and " +
                            std::to_string(regimes_checked.size()) +
                            " input regimes within tolerance of the fp64 oracle";
  phase.reset();
  if (opt.time) time_passed_candidate(task, compiled, opt, parts, timing_manifest, v);
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
