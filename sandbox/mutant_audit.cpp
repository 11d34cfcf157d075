#include "sandbox/mutant_audit.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "reports/remove_tree.h"
#include "sandbox/process.h"
#include "sandbox/sandbox_internal.h"
#include "timing/phase_log.h"
#include "workloads/tensor.h"

namespace kg {

namespace fs = std::filesystem;
using namespace sandbox_detail;

witness_trials::witness_trials(const task_def& t, std::vector<input_config> plan)
    : plan_(std::move(plan)) {
  std::map<std::string, const task_shape*> by_name;
  for (const auto& s : t.shapes)
    by_name[s.name] = &s;
  for (const auto& c : plan_) {
    auto it = by_name.find(c.shape);
    if (it == by_name.end()) { // an extra tail shape: owned here
      shapes_.push_back({c.shape, c.dims});
      it = by_name.emplace(c.shape, &shapes_.back()).first;
    }
    task_input_regime r;
    r.strict_regime = c.regime;
    r.identity_params = c.params == "identity";
    r.normal_params = c.params == "normal";
    r.normal_weights_only = c.params == "weight_normal";
    r.normal_biases_only = c.params == "bias_normal";
    keys_.push_back({&t, it->second, c.seed, r, false});
  }
}

namespace {

// One trial of the combined manifest: which group it belongs to (0: the witness plan when there
// is one, then the checks in order) and how it is judged.
struct audit_trial {
  std::size_t group = 0;
  trial_key key;
  std::string label, regime;
  bool busy = false;
  const sandbox_options* rule = nullptr; // strict (peer nullptr) or a peer's
};

sandbox_options rule_of(const audit_check& c, const mutant_audit_options& opt) {
  sandbox_options so;
  so.self_exe = opt.self_exe;
  so.work_dir = opt.work_dir;
  so.trials = opt.strict_trials;
  so.seed = opt.seed;
  so.timeout_seconds = opt.timeout_seconds;
  so.peer = c.peer;
  so.cache = opt.cache;
  so.worker = opt.worker;
  so.gate = opt.gate;
  so.time = false;
  return so;
}

double number(const nlohmann::json& v) {
  if (v.is_number()) return v.get<double>();
  const auto s = v.is_string() ? v.get<std::string>() : std::string("nan");
  return s == "inf" ? INFINITY : s == "-inf" ? -INFINITY : NAN;
}

disagreement from_judgement(const judgement& j) {
  disagreement d;
  if (!j.worst.is_object()) { // judged without evidence: the sentence alone
    d.crash = j.why;
    return d;
  }
  d.output = j.worst.value("output", std::string());
  d.index = j.worst.value("index", std::int64_t{-1});
  if (j.worst.contains("got")) d.got = number(j.worst["got"]);
  if (j.worst.contains("expected")) d.want = number(j.worst["expected"]);
  d.abs_error = std::fabs(d.got - d.want);
  if (d.output.empty()) d.crash = j.why; // (no element to show: the sentence says what failed)
  return d;
}

std::string seconds_text(double s) {
  std::ostringstream o;
  o << s;
  return o.str();
}

// The bytes of every output a manifest's trials write (what the run adds to the scratch).
std::size_t output_bytes(const nlohmann::json& manifest) {
  std::size_t total = 0;
  for (const auto& t : manifest.at("trials"))
    for (const auto& x : t.at("outputs")) {
      std::size_t n = dtype_size(static_cast<dtype>(x.at("dtype").get<int>()));
      for (const auto& d : x.at("shape"))
        n *= d.get<std::size_t>();
      total += n;
    }
  return total;
}

bool is_task_shape(const task_def& t, const task_shape* s) {
  return std::any_of(t.shapes.begin(), t.shapes.end(), [&](const auto& own) { return &own == s; });
}

// What one trial showed: nothing (it agreed), a wrong output, or a failed call.
struct trial_outcome {
  bool ran = false;
  std::optional<disagreement> wrong;
  std::string why;
};

} // namespace

std::vector<trial_key> audit_trial_keys(const task_def& task, const witness_trials* witness,
                                        const std::vector<audit_check>& checks,
                                        const mutant_audit_options& opt) {
  std::vector<trial_key> keys;
  if (witness) keys = witness->keys();
  for (const auto& c : checks)
    for (const auto& lt : correctness_trials(task, rule_of(c, opt)))
      keys.push_back(lt.key);
  return keys;
}

candidate_audit audit_candidate(const task_def& task, const compile_result& compiled,
                                const witness_trials* witness,
                                const std::vector<audit_check>& checks,
                                const mutant_audit_options& opt) {
  if (!opt.cache || (!opt.worker && !opt.workers))
    throw std::invalid_argument("audit_candidate: a trial cache and a worker are required");
  const auto t0 = std::chrono::steady_clock::now();
  candidate_audit a;
  a.checks.resize(checks.size());
  // Groups: each check's trials first, in order, then the witness plan (group checks.size()). A
  // candidate that crashes on every input then still gets each check's verdict (a run each)
  // before the runs left go to the witness plan, where one disagreement is enough.
  const std::size_t witness_group = checks.size();
  const std::size_t groups = checks.size() + 1;
  if (!compiled.ok) {
    for (auto& c : a.checks)
      c = {kill_verdict::missing, "not run: it does not compile"};
    return a;
  }
  remove_tree(opt.work_dir);
  fs::create_directories(opt.work_dir);

  // The combined plan: each check's own trials, then the witness plan (strict's rule: the fp64
  // oracle).
  std::vector<sandbox_options> rules;
  rules.reserve(checks.size() + 1);
  for (const auto& c : checks)
    rules.push_back(rule_of(c, opt));
  rules.push_back(rule_of({"witness", nullptr}, opt));
  std::vector<audit_trial> plan;
  for (std::size_t k = 0; k < checks.size(); ++k)
    for (const auto& lt : correctness_trials(task, rules[k]))
      plan.push_back({k, lt.key, lt.label, lt.regime, lt.busy, &rules[k]});
  const std::size_t first_witness = plan.size();
  if (witness)
    for (std::size_t i = 0; i < witness->keys().size(); ++i) {
      const auto& c = witness->plan()[i];
      plan.push_back(
          {witness_group, witness->keys()[i], c.name, c.regime_name, false, &rules.back()});
    }
  auto& cache = *opt.cache;
  for (const auto& t : plan)
    cache.prefetch(t.key);
  std::vector<std::shared_ptr<const trial_data>> data;
  // Each peer trial's reference: the cached trial's own (no copy), or the rounded oracle.
  std::vector<std::vector<host_tensor>> reference_storage(plan.size());
  static const std::vector<host_tensor> no_reference; // (strict's trials: the oracle judges)
  std::vector<const std::vector<host_tensor>*> reference(plan.size(), &no_reference);
  std::vector<trial_files> files;
  std::vector<std::optional<std::string>> refused(plan.size()); // see candidate_audit::refused
  for (std::size_t i = 0; i < plan.size(); ++i) {
    try {
      data.push_back(cache.take(plan[i].key));
      files.push_back(cache.files(plan[i].key));
    } catch (const std::exception& e) {
      if (plan[i].group != witness_group || is_task_shape(task, plan[i].key.shape)) throw;
      refused[i] = one_line(e.what());
      a.refused.push_back({i - first_witness, *refused[i]});
      data.push_back(nullptr);
      files.emplace_back();
      continue;
    }
    if (plan[i].rule->peer) {
      scoped_phase phase("audit.peer_reference");
      reference[i] = &peer_reference_view(task, *data.back(), reference_storage[i]);
    }
  }

  std::vector<trial_outcome> outcome(plan.size());
  for (std::size_t i = 0; i < plan.size(); ++i)
    if (refused[i]) outcome[i] = {true, std::nullopt, "refused: " + *refused[i]};
  std::vector<bool> decided(groups, false); // a check that already rejected: its trials skipped
  std::vector<bool> failed(groups, false);  // a group's first disagreement is judged already
  // Two stages: first each check's first trial and the whole witness plan, then the checks' other
  // trials -- only for the checks the first stage did not decide. Most mutants are wrong on
  // every input, so most checks reject at their first trial and the rest is never run.
  std::vector<bool> later(plan.size(), false);
  for (std::size_t i = 1; i < plan.size(); ++i)
    later[i] = plan[i].group != witness_group && plan[i].group == plan[i - 1].group;
  // Trials of the same inputs run once: the same shape and the same input bytes (kernelbench,
  // kernelbench-v0 and kbv draw their first inputs alike; sol, flashinfer, strict's first draw and
  // the witness plan's first configurations draw N(0,1) activations from one seed, and where the
  // task has no weight or bias, or their parameter draws agree, the inputs are the same). Each
  // check judges the outputs by its own rule, and a crash there ends each of them. The candidate
  // is called once per input set, as each checker would call it once.
  std::vector<std::size_t> shared_with(plan.size()); // the first plan trial of the same inputs
  {
    std::map<std::string, std::size_t> first_of;
    for (std::size_t i = 0; i < plan.size(); ++i) {
      std::string same = files[i].inputs_sha256.empty() ? plan[i].key.id() : files[i].inputs_sha256;
      for (const auto& [sym, v] : plan[i].key.shape->dims)
        same += "/" + sym + "=" + std::to_string(v);
      shared_with[i] = first_of.emplace(same + (plan[i].busy ? "/busy" : ""), i).first->second;
    }
  }
  // A crash in the witness plan witnesses the mutant; each further one would cost a worker start,
  // so the configurations after it are not run (they count as not disagreeing in its kill row).
  bool witness_crashed = false;
  bool second_stage = false;
  bool unwitnessed_early = false; // a mutant the witness plan shows wrong nowhere: stage 2 skipped
  auto needed = [&](std::size_t i, bool by_stage) {
    if (outcome[i].ran) return false;
    if (by_stage && later[i] && !second_stage) return false;
    return plan[i].group == witness_group ? !witness_crashed : !decided[plan[i].group];
  };
  // A plan trial's outcome, set once: a disagreement marks its group (and decides a check).
  auto settle = [&](std::size_t i, std::optional<disagreement> wrong, const std::string& why) {
    outcome[i] = {true, std::move(wrong), why};
    if (!outcome[i].wrong) return;
    failed[plan[i].group] = true;
    if (plan[i].group != witness_group) decided[plan[i].group] = true;
  };
  const fs::path result_file = opt.work_dir / "worker_result.json";
  // One set of output buffers for every trial of this candidate: each read overwrites them, and
  // a large task's tens of megabytes are not zero-filled and faulted in again per trial.
  std::vector<host_tensor> outs;
  std::vector<double> call_seconds; // every call that finished
  while (a.worker_runs < opt.max_runs && a.timeouts < opt.max_timeouts) {
    std::vector<std::size_t> sent; // the plan trial (first of its inputs) per manifest entry
    nlohmann::json manifest = {{"shared_object", compiled.shared_object.string()},
                               {"result", result_file.string()},
                               {"symbol", compiled.symbol},
                               {"fresh", true},
                               {"trials", nlohmann::json::array()}};
    if (opt.trial_limit_seconds > 0) manifest["trial_limit_seconds"] = opt.trial_limit_seconds;
    if (opt.resident_bytes > 0) manifest["resident_bytes"] = opt.resident_bytes;
    if (opt.guard_bytes > 0) manifest["guard_bytes"] = opt.guard_bytes;
    if (opt.pool_bytes > 0) manifest["pool_bytes"] = opt.pool_bytes;
    std::vector<bool> queued(plan.size(), false);
    for (std::size_t i = 0; i < plan.size(); ++i) {
      const std::size_t f = shared_with[i];
      if (!needed(i, true) || queued[f]) continue;
      queued[f] = true;
      manifest["trials"].push_back(trial_entry(task, plan[f].key, *data[f], files[f],
                                               opt.work_dir / ("t" + std::to_string(f)),
                                               plan[f].busy));
      sent.push_back(f);
    }
    if (sent.empty()) {
      if (second_stage) break;
      if (opt.mutant && witness && !failed[witness_group]) { // unwitnessed: see mutant_audit.h
        unwitnessed_early = true;
        break;
      }
      second_stage = true;
      continue;
    }
    const auto manifest_file = opt.work_dir / "manifest.json";
    std::ofstream(manifest_file) << manifest.dump() << "\n";
    fs::remove(result_file);
    // The run's limit grows with its trials: a large task's inputs take a while to copy, and a
    // slow candidate may spend up to the per-call limit in each call without hanging (its calls
    // are judged by their values, so the whole run must not time out first).
    sandbox_options limit = rules.back();
    limit.timeout_seconds =
        opt.timeout_seconds + (0.5 + opt.trial_limit_seconds) * static_cast<double>(sent.size());
    std::optional<byte_budget::hold> outputs_held; // until this run's outputs are judged
    if (opt.output_bytes) outputs_held.emplace(opt.output_bytes->reserve(output_bytes(manifest)));
    const auto run_start = std::chrono::steady_clock::now();
    const auto o = [&] {
      if (!opt.workers) return run_gated(*opt.worker, limit, manifest_file, false);
      const auto w = opt.workers->take(); // (given back before the judging below)
      return run_gated(*w, limit, manifest_file, false);
    }();
    const auto judge_start = std::chrono::steady_clock::now();
    a.run_seconds += std::chrono::duration<double>(judge_start - run_start).count();
    a.trials_sent += static_cast<int>(sent.size());
    ++a.worker_runs;
    if (o.not_started) // the harness's fault (no CUDA context): no verdict of the candidate's
      throw std::runtime_error("the worker " + o.describe());
    const auto wr = read_worker_result(result_file);
    if (o.replied && o.code == 4) // the harness's fault: no verdict of the candidate's from it
      throw std::runtime_error("the worker could not write an output: " +
                               wr.value("error", std::string("(no detail)")));
    const auto& reported = wr.value("trials", nlohmann::json::array());
    std::size_t n = 0;
    for (; n < sent.size() && n < reported.size(); ++n) {
      const std::size_t f = sent[n];
      const auto& t = reported[n];
      a.slowest_trial_seconds = std::max(a.slowest_trial_seconds, t.value("seconds", 0.0));
      call_seconds.push_back(t.value("seconds", 0.0));
      std::string fault;
      if (const int rc = t.value("rc", 0); rc != 0) fault = "kg_run returned " + std::to_string(rc);
      for (std::size_t k = 0; fault.empty() && k < task.inputs.size(); ++k)
        if (t.contains("inputs_modified") && t["inputs_modified"].at(k).get<bool>())
          fault = "kg_run modified input '" + task.inputs[k].name + "' in place";
      if (fault.empty() && t.value("wrote_outside", false))
        fault = "kg_run wrote outside its buffers (into the guard around one)";
      const auto trial_dir = opt.work_dir / ("t" + std::to_string(f));
      if (fault.empty()) {
        scoped_phase phase("audit.judge"); // this process's reading and judging of the outputs
        if (!read_outputs_into(task, plan[f].key, trial_dir, outs))
          fault = "the worker wrote no output";
      }
      for (std::size_t i = f; i < plan.size(); ++i) { // every plan trial of these inputs
        if (shared_with[i] != f || !needed(i, false)) continue;
        if (!fault.empty()) {
          disagreement d;
          d.crash = fault;
          settle(i, d, fault);
          continue;
        }
        scoped_phase phase("audit.judge");
        // The worst element only for a group's first disagreement: that is the evidence kept
        // (later trials are judged in plan order, after it).
        // (statistics off: nothing here reads a comparison's counts, only pass or fail and, for
        // a group's first disagreement, the evidence)
        const auto j = judge(task, plan[i].key, *data[i], *reference[i], plan[i].regime, outs,
                             *plan[i].rule, !failed[plan[i].group], false);
        if (j.pass)
          settle(i, std::nullopt, "");
        else
          settle(i, from_judgement(j), j.why);
      }
      // Judged: its outputs go now, not with the candidate (a large task's 60 trials of 67 MB
      // outputs per worker would otherwise sit in memory-backed scratch together).
      remove_tree(trial_dir);
    }
    a.judge_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - judge_start).count();
    if (o.ok() && n == sent.size()) continue; // (the next stage, or nothing left to send)
    // The run ended early: the trial it was on failed (a crash or a hang), the next run resumes
    // after it in a fresh worker.
    if (n >= sent.size()) break; // (replied with every trial, yet not ok: nothing left to run)
    const std::size_t f = sent[n];
    disagreement d;
    d.crash = o.timed_out ? "timed out (the worker was killed after " +
                                std::to_string(limit.timeout_seconds) + " s)"
              : o.trial_hung()
                  ? "hung (the call ran past the per-trial limit of " +
                        seconds_text(opt.trial_limit_seconds) + " s)"
                  : "worker " + o.describe() +
                        (wr.contains("error") ? ": " + one_line(wr["error"].get<std::string>())
                                              : std::string());
    for (std::size_t i = f; i < plan.size(); ++i)
      if (shared_with[i] == f && needed(i, false)) {
        if (plan[i].group == witness_group) witness_crashed = true;
        settle(i, d, d.crash);
      }
    ++a.crashes;
    if (o.replied && o.code == 3) { // the object does not load: every trial would end the same
      for (std::size_t k = 0; k < plan.size(); ++k)
        if (!outcome[k].ran) settle(k, d, d.crash);
      break;
    }
    if (o.timed_out) ++a.timeouts;
    if (o.trial_hung()) ++a.hangs;
  }

  // The witness plan's record.
  if (witness) {
    const auto& cfgs = witness->plan();
    a.witness = witness_mutant(cfgs, [&](const input_config& c) -> std::optional<disagreement> {
      const std::size_t i = first_witness + static_cast<std::size_t>(&c - cfgs.data());
      return outcome[i].wrong;
    });
  }
  // Each check: killed at its first failing trial; survived when every trial ran and passed.
  for (std::size_t k = 0; k < checks.size(); ++k) {
    const std::size_t g = k;
    std::size_t ran = 0, total = 0;
    for (std::size_t i = 0; i < plan.size(); ++i) {
      if (plan[i].group != g) continue;
      ++total;
      if (!outcome[i].ran) continue;
      ++ran;
      if (outcome[i].wrong && a.checks[k].verdict != kill_verdict::killed)
        a.checks[k] = {kill_verdict::killed,
                       plan[i].key.shape->name + " " + plan[i].label + ": " + outcome[i].why};
    }
    if (a.checks[k].verdict == kill_verdict::killed) continue;
    if (ran < total && unwitnessed_early) {
      a.checks[k] = {kill_verdict::missing,
                     "not decided: " + std::to_string(ran) + " of " + std::to_string(total) +
                         " trials accepted; the rest not run, as no input of the witness plan "
                         "shows this mutant wrong (unwitnessed verdicts are never scored)"};
      continue;
    }
    a.checks[k] = ran == total ? check_verdict{kill_verdict::survived,
                                               std::to_string(total) + " trials accepted"}
                               : check_verdict{kill_verdict::missing,
                                               "not decided: " + std::to_string(total - ran) +
                                                   " of " + std::to_string(total) +
                                                   " trials not run (the candidate crashed or hung "
                                                   "too often)"};
  }
  if (!call_seconds.empty()) {
    const auto mid = call_seconds.begin() + static_cast<std::ptrdiff_t>(call_seconds.size() / 2);
    std::nth_element(call_seconds.begin(), mid, call_seconds.end());
    a.median_trial_seconds = *mid;
  }
  remove_tree(opt.work_dir);
  a.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return a;
}

std::filesystem::path find_compute_sanitizer() {
  if (const char* e = std::getenv("KERNELGATE_COMPUTE_SANITIZER"); e && *e) return e;
  const fs::path beside = fs::path(KG_NVCC).parent_path() / "compute-sanitizer";
  if (fs::is_regular_file(beside)) return beside;
  if (const char* path = std::getenv("PATH"))
    for (std::string_view rest = path; !rest.empty();) {
      const auto colon = rest.find(':');
      const fs::path f = fs::path(std::string(rest.substr(0, colon))) / "compute-sanitizer";
      if (fs::is_regular_file(f)) return f;
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  return {};
}

nlohmann::json sanitizer_finding::to_json() const {
  return {{"ran", ran}, {"found", found}, {"tool", tool}, {"detail", detail}};
}

sanitizer_finding sanitize_candidate(const task_def& task, const compile_result& compiled,
                                     const witness_trials& witness, const mutant_audit_options& opt,
                                     const fs::path& sanitizer) {
  sanitizer_finding f;
  if (sanitizer.empty()) {
    f.detail = "no compute-sanitizer on this machine";
    return f;
  }
  if (!compiled.ok || !opt.cache) {
    f.detail = "not compiled";
    return f;
  }
  // The smallest configuration of the first regime with the task's own parameters (a sanitized
  // run is 10-100x slower) that the task computes (see refused_config).
  auto elements = [](const input_config& c) {
    double n = 1;
    for (const auto& [k, v] : c.dims)
      n *= static_cast<double>(v);
    return n;
  };
  std::vector<std::size_t> picks;
  for (std::size_t i = 0; i < witness.plan().size(); ++i)
    if (witness.plan()[i].regime == 0 && witness.plan()[i].params == "task") picks.push_back(i);
  std::stable_sort(picks.begin(), picks.end(), [&](std::size_t x, std::size_t y) {
    return elements(witness.plan()[x]) < elements(witness.plan()[y]);
  });
  std::shared_ptr<const trial_data> data;
  trial_files files;
  const trial_key* key = nullptr;
  for (const std::size_t i : picks) {
    try {
      data = opt.cache->take(witness.keys()[i]);
      files = opt.cache->files(witness.keys()[i]);
      key = &witness.keys()[i];
      break;
    } catch (const std::exception&) {
      if (is_task_shape(task, witness.keys()[i].shape)) throw;
    }
  }
  if (!key) {
    f.detail = "no configuration in the first regime";
    return f;
  }
  remove_tree(opt.work_dir);
  fs::create_directories(opt.work_dir);
  const fs::path manifest = opt.work_dir / "sanitize.json";
  std::ofstream(manifest) << nlohmann::json{{"shared_object", compiled.shared_object.string()},
                                            {"symbol", compiled.symbol},
                                            {"result", (opt.work_dir / "result.json").string()},
                                            {"trials",
                                             {trial_entry(task, *key, *data, files,
                                                          opt.work_dir / "t", false)}}}
                                 .dump()
                          << "\n";
  constexpr int found_code = 86; // --error-exitcode: a hazard was reported
  f.ran = true;
  for (const char* tool : {"racecheck", "synccheck"}) {
    process_limits lim;
    lim.timeout_seconds = 10 * opt.timeout_seconds;
    const auto r = run_process({sanitizer.string(), "--tool", tool, "--error-exitcode",
                                std::to_string(found_code), opt.self_exe.string(), "worker",
                                manifest.string()},
                               opt.work_dir / (std::string(tool) + ".log"), lim);
    f.detail = std::string(tool) + ": " + r.describe();
    if (r.exited && r.exit_code == found_code) {
      f.found = true;
      f.tool = tool;
      f.detail += ": " + one_line(file_tail(opt.work_dir / (std::string(tool) + ".log"), 400));
      break;
    }
  }
  remove_tree(opt.work_dir);
  return f;
}

} // namespace kg
