#include "suite/run_command.h"

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>

#include <unistd.h>

#include "base/sha256.h"
#include "gpu/device_info.h"
#include "gpu/nvml.h"
#include "reports/colocation.h"
#include "reports/environment.h"
#include "reports/json_input.h"
#include "reports/result_writer.h"
#include "reports/run_compare.h"
#include "suite/exit_codes.h"
#include "suite/gpu_hold.h"
#include "suite/history_command.h"
#include "suite/shard_plan.h"
#include "suite/suite_catalog.h"
#include "suite/suite_gpu.h"
#include "suite/suite_runner.h"
#include "timing/clock_policy.h"
#include "timing/interrupt.h"
#include "workloads/decode_engine_plan.h"
#include "workloads/step_cost_model.h"

namespace kg {
namespace {

namespace fs = std::filesystem;

std::string file_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// What a resumed run must share with the run it continues: the suite's bytes, the selection and
// the sample counts (else its records would mix two measurements).
nlohmann::json run_identity(const suite_def& s, const run_options& o,
                            const std::vector<suite_workload>& ordered,
                            const std::vector<role_override>& overrides,
                            const nlohmann::json& warm) {
  nlohmann::json ov = nlohmann::json::object();
  for (const auto& x : overrides)
    ov[x.role] = {{"source", x.source.string()}, {"sha256", x.sha256}};
  std::string bytes;
  for (const auto& f : s.files)
    bytes += file_text(f);
  nlohmann::json ids = nlohmann::json::array();
  for (const auto& w : ordered)
    ids.push_back(w.id);
  return {{"suite", s.name},
          {"suite_files", s.files},
          {"suite_sha256", sha256_hex(bytes)},
          {"filter", o.filter},
          {"repeats", o.repeats},
          {"clock_policy", o.clocks},
          {"overrides", ov},
          {"warm_from", warm.is_null() ? nlohmann::json(nullptr) : warm},
          {"workloads", ids.size()},
          {"order", ids}};
}

// --warm-from RUN: the serving warm-up model of each workload of a finished run (its records'
// extra.warm_start), by id, and {path, sha256} of the file read. Throws compare_input_error (the
// run cannot be read) or std::invalid_argument (no model, or one that is not a model).
std::map<std::string, step_cost_model> warm_models_of(const std::string& run,
                                                      nlohmann::json& source) {
  const auto r = load_suite_run(run, "RUN");
  std::map<std::string, step_cost_model> models;
  for (const auto& rec : r.records) {
    const auto extra = rec.value("extra", nlohmann::json::object());
    if (!extra.is_object() || !extra.contains("warm_start")) continue;
    const auto id = rec["id"].get<std::string>();
    try {
      models.emplace(id, step_cost_model_from_json(extra["warm_start"]));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("workload " + id + ": " + e.what());
    }
  }
  if (models.empty())
    throw std::invalid_argument("no workload of it has a serving warm-up model "
                                "(extra.warm_start)");
  source = {{"path", r.file.string()}, {"sha256", r.sha256}, {"models", models.size()}};
  return models;
}

// Whether a resumed folder's identity matches; "" or the first field that differs.
std::string identity_mismatch(const nlohmann::json& was, const nlohmann::json& now) {
  for (const char* k :
       {"suite_sha256", "filter", "repeats", "clock_policy", "overrides", "warm_from"})
    if (was.value(k, nlohmann::json()) != now[k])
      return std::string(k) + " was " + was.value(k, nlohmann::json()).dump() + ", now " +
             now[k].dump();
  return "";
}

// What the decode engine of a run (decode_engine_config's defaults: 32 slots of 8448 tokens) can
// serve: a workload past it is refused before anything runs, not found out half-way.
std::string unservable(const suite_workload& w) {
  const decode_engine_config c;
  auto num = [&](const char* k) { return w.params.value(k, 0); };
  if (w.kind == "decode_step") {
    if (num("batch") < 1 || num("batch") > c.max_batch)
      return "batch " + std::to_string(num("batch")) + " is outside the decode engine's 1.." +
             std::to_string(c.max_batch) + " sequences";
    if (num("context") < 1 || num("context") + 1 > c.max_context)
      return "context " + std::to_string(num("context")) + " + 1 exceeds the engine's " +
             std::to_string(c.max_context) + " tokens a slot";
  }
  if ((w.kind == "serving_throughput" || w.kind == "serving_p99") &&
      8192 + w.params.value("output_tokens", 256) > c.max_context)
    return "contexts up to 8192 + " + std::to_string(w.params.value("output_tokens", 256)) +
           " outputs exceed the engine's " + std::to_string(c.max_context) + " tokens a slot";
  if ((w.kind == "serving_throughput" || w.kind == "serving_p99") &&
      (num("prefill_chunk_tokens") < 1 || num("prefill_chunk_tokens") > suite_max_prefill_tokens))
    return "prefill_chunk_tokens " + std::to_string(num("prefill_chunk_tokens")) +
           " is outside the serving engine's 1.." + std::to_string(suite_max_prefill_tokens) +
           " prompt tokens a step";
  if ((w.kind == "gemv" || w.kind == "attention" || w.kind == "rmsnorm" ||
       w.kind == "add_rmsnorm" || w.kind == "qk_norm_rope" || w.kind == "silu_mul" ||
       w.kind == "argmax" || w.kind == "embedding") &&
      (num("batch") < 1 || num("batch") > c.max_batch))
    return "batch " + std::to_string(num("batch")) + " is outside the decode kernels' 1.." +
           std::to_string(c.max_batch);
  return "";
}

// --costs-from RUN: the measured seconds of each workload of a finished run and of each set-up,
// so the shards' split follows what the machine really took; {path, sha256} of the file read.
struct measured_costs {
  std::map<std::string, double> workload, setup;
  nlohmann::json source;
};

measured_costs costs_of(const std::string& run) {
  const auto r = load_suite_run(run, "RUN");
  measured_costs c;
  for (const auto& rec : r.records)
    if (rec.contains("wall_seconds") && rec["wall_seconds"].is_number())
      c.workload[rec["id"].get<std::string>()] = rec["wall_seconds"].get<double>();
  for (const auto& s : r.summary.value("setups", nlohmann::json::array()))
    if (s.is_object() && s.contains("setup") && s.value("seconds", nlohmann::json()).is_number())
      c.setup[s["setup"].get<std::string>()] += s["seconds"].get<double>();
  c.source = {{"path", r.file.string()}, {"sha256", r.sha256}};
  return c;
}

// The workloads as shard items: the suite's expected seconds (or the measured ones), grouped by
// set-up; a set-up's cost is known only from a measured run (0 otherwise).
std::vector<shard_item> shard_items(const std::vector<suite_workload>& w, const measured_costs* c) {
  std::vector<shard_item> items;
  for (const auto& x : w) {
    shard_item it{x.id, x.cost_seconds, x.setup, 0};
    if (c) {
      if (auto f = c->workload.find(x.id); f != c->workload.end()) it.cost = f->second;
      if (auto f = c->setup.find(x.setup); f != c->setup.end()) it.group_cost = f->second;
    }
    items.push_back(std::move(it));
  }
  return items;
}

void print_plan(std::ostream& out, const std::vector<suite_workload>& w) {
  std::string group;
  for (const auto& x : w) {
    if (x.setup != group) out << "set-up " << (group = x.setup) << "\n";
    out << "  " << std::left << std::setw(48) << x.id << std::right << std::setw(7) << std::fixed
        << std::setprecision(1) << x.cost_seconds << " s\n";
  }
  out << w.size() << " workloads, expected " << std::setprecision(0) << total_cost_seconds(w)
      << " s\n"
      << std::defaultfloat;
}

} // namespace

int run_suite_command(const run_options& o, const std::vector<std::string>& args, std::ostream& out,
                      std::ostream& err) {
  suite_def suite;
  std::vector<suite_workload> ordered;
  try {
    suite = load_suite_validated(o.suite);
    ordered = order_for_run(filter_workloads(suite.workloads, o.filter));
  } catch (const suite_error& e) {
    err << "kernelgate: " << printable(e.what(), 400) << "\n";
    return exit_code::bad_input;
  }
  if (ordered.empty()) {
    err << "kernelgate: no workload of suite " << suite.name << " matches --filter '"
        << printable(o.filter) << "'\n";
    return exit_code::bad_input;
  }
  for (const auto& w : ordered)
    if (const auto why = unservable(w); !why.empty()) {
      err << "kernelgate: workload " << w.id << " cannot be served: " << why << "\n";
      return exit_code::bad_input;
    }
  std::optional<shard_spec> shard;
  if (!o.shard.empty()) {
    std::string why;
    if (!(shard = parse_shard_spec(o.shard, why))) {
      err << "kernelgate: --shard: " << why << "\n";
      return exit_code::bad_input;
    }
  }
  std::optional<measured_costs> costs;
  if (!o.costs_from.empty()) {
    try {
      costs = costs_of(o.costs_from);
    } catch (const std::exception& e) {
      err << "kernelgate: --costs-from " << printable(o.costs_from) << ": "
          << printable(e.what(), 400) << "\n";
      return exit_code::bad_input;
    }
  }
  // This process's part: every workload, or its shard's, in run order.
  std::vector<suite_workload> mine = ordered;
  if (shard) {
    mine.clear();
    for (const auto i : items_of_shard(shard_items(ordered, costs ? &*costs : nullptr), *shard))
      mine.push_back(ordered[i]);
  }
  if (o.list_only) {
    if (shard) out << "shard " << shard->index << " of " << shard->count << " (0-based)\n";
    print_plan(out, mine);
    return exit_code::ok;
  }
  const auto policy = parse_clock_policy(o.clocks);
  if (!policy) {
    err << "kernelgate: invalid --clocks '" << printable(o.clocks)
        << "' (observe, require-locked, lock=<MHz>)\n";
    return exit_code::bad_input;
  }
  if (!o.resume.empty() && !o.out.empty() && fs::path(o.out) != fs::path(o.resume)) {
    err << "kernelgate: --resume writes into the folder it resumes; drop --out\n";
    return exit_code::bad_input;
  }
  std::vector<role_override> overrides;
  try {
    for (const auto& spec : o.overrides) {
      overrides.push_back(load_role_override(spec));
      for (std::size_t i = 0; i + 1 < overrides.size(); ++i)
        if (overrides[i].role == overrides.back().role)
          throw override_error("--override: role " + overrides.back().role + " given twice");
    }
  } catch (const override_error& e) {
    err << "kernelgate: " << printable(e.what(), 400) << "\n";
    return exit_code::bad_input;
  }
  nlohmann::json warm_source;
  std::map<std::string, step_cost_model> warm_models;
  if (!o.warm_from.empty()) {
    try {
      warm_models = warm_models_of(o.warm_from, warm_source);
    } catch (const std::exception& e) { // compare_input_error, std::invalid_argument
      err << "kernelgate: --warm-from " << printable(o.warm_from) << ": "
          << printable(e.what(), 400) << "\n";
      return exit_code::bad_input;
    }
  }
  auto identity = run_identity(suite, o, ordered, overrides, warm_source);
  identity["costs_from"] = costs ? costs->source : nlohmann::json(nullptr);
  const shard_spec part = shard ? *shard : shard_spec{};
  const fs::path dir = !o.resume.empty() ? fs::path(o.resume)
                       : !o.out.empty()  ? fs::path(o.out)
                                         : fs::path("kg-out/run-" + suite.name +
                                                    (shard ? "-shard-" + std::to_string(part.index) +
                                                                "-of-" + std::to_string(part.count)
                                                           : ""));
  if (!o.resume.empty()) {
    const auto file = dir / "run_identity.json";
    nlohmann::json was;
    try {
      was = nlohmann::json::parse(file_text(file));
    } catch (const std::exception&) {
      err << "kernelgate: cannot resume " << printable(dir.string())
          << ": no readable run_identity.json (not a run folder)\n";
      return exit_code::bad_input;
    }
    if (const auto why = identity_mismatch(was, identity); !why.empty()) {
      err << "kernelgate: cannot resume " << printable(dir.string()) << ": a different run ("
          << printable(why, 300) << ")\n";
      return exit_code::bad_input;
    }
    try { // a shard resumes as the same shard
      const auto m = read_shard_manifest(dir);
      if (!(m.spec == part))
        throw std::runtime_error("it is shard " + std::to_string(m.spec.index) + "/" +
                                 std::to_string(m.spec.count) + ", this is " +
                                 std::to_string(part.index) + "/" + std::to_string(part.count));
    } catch (const std::runtime_error& e) {
      if (fs::exists(dir / shard_manifest_file)) {
        err << "kernelgate: cannot resume " << printable(dir.string()) << ": "
            << printable(e.what(), 300) << "\n";
        return exit_code::bad_input;
      }
    }
  }
  const auto gpu = take_gpu(*policy, "run needs a GPU", err);
  if (!gpu) return exit_code::unavailable;
  suite_gpu_settings settings;
  settings.repeats = o.repeats;
  settings.log = &err;
  settings.overrides = std::move(overrides);
  settings.warm_models = std::move(warm_models);
  auto session = std::make_unique<suite_gpu_session>(settings);
  auto config = identity;
  config["clocks_note"] = gpu->clocks_note();
  config["shard"] = shard ? nlohmann::json{{"index", part.index}, {"count", part.count}}
                          : nlohmann::json(nullptr);
  try { // before any result exists: a wrong override runs nothing
    config["override_checks"] = session->check_overrides();
  } catch (const override_error& e) {
    err << "kernelgate: " << printable(e.what(), 400) << "\n";
    return exit_code::bad_input;
  }
  std::unique_ptr<result_writer> writer;
  int torn = 0;
  try {
    if (o.resume.empty()) {
      writer =
          std::make_unique<result_writer>(dir, "suite_run", args, collect_environment(), config);
      write_file_atomically(dir / "run_identity.json", identity.dump(1) + "\n");
    } else {
      writer = std::make_unique<result_writer>(result_writer::resume_tag{}, dir, "suite_run", args,
                                               collect_environment(), config, &torn);
    }
  } catch (const output_error& e) {
    err << "kernelgate: " << printable(e.what(), 400) << "\n";
    return exit_code::bad_input;
  }
  try { // what `kernelgate merge` needs to put the shards back together
    std::vector<std::string> items, assigned;
    for (const auto& w : ordered)
      items.push_back(w.id);
    for (const auto& w : mine)
      assigned.push_back(w.id);
    auto id = identity;
    id.erase("order"); // (the items)
    write_shard_manifest(dir, make_shard_manifest("run", part, std::move(items),
                                                  std::move(assigned), std::move(id)));
  } catch (const output_error& e) {
    err << "kernelgate: " << printable(e.what(), 400) << "\n";
    return exit_code::bad_input;
  }
  const auto done = finished_ids(writer->records());
  if (!o.resume.empty())
    err << "kernelgate: resuming " << dir.string() << ": " << done.size() << " finished, "
        << (torn ? "a torn record cut, " : "") << "the rest runs\n";
  std::vector<suite_workload> to_run;
  for (const auto& w : mine)
    if (!done.count(w.id)) to_run.push_back(w);
  const bool terminal = !o.no_progress && &out == &std::cout && ::isatty(STDOUT_FILENO);
  suite_progress progress(out, terminal, to_run);
  const auto t0 = std::chrono::steady_clock::now();
  suite_loop_result r;
  nlohmann::json setups;
  try {
    r = run_suite_loop(
        mine, done, [&](const suite_workload& w) { return session->run(w); },
        [&](const suite_workload& w) { return session->roles(w); }, *writer, progress);
    setups = session->setups();
    session.reset();                  // tenants stopped, engines freed, before the result is final
  } catch (const std::exception& e) { // a set-up that failed outside any workload
    writer->finish({{"status", "failed"}, {"error", e.what()}});
    err << "kernelgate: run failed: " << printable(e.what(), 400) << "\n";
    return exit_code::internal;
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int failing = 0;
  for (const auto& rec : writer->records())
    failing += !record_gates_pass(rec);
  const bool complete = !r.interrupted;
  // Every workload beside others against its solo twin of this run (a resumed run's records
  // include the earlier process's).
  const auto colocation = colocation_fractions(writer->records());
  const auto path = writer->finish({{"status", complete ? "complete" : "interrupted"},
                                    {"gates_passed", failing == 0},
                                    {"workloads", writer->record_count()},
                                    {"workloads_failing_gates", failing},
                                    {"measured_this_process", r.measured},
                                    {"resumed_finished", r.skipped},
                                    {"wall_seconds", wall},
                                    {"setups", setups},
                                    {"colocation", to_json(colocation)}});
  out << colocation_text(colocation);
  out << "run " << suite.name
      << (shard ? " shard " + std::to_string(part.index) + "/" + std::to_string(part.count) : "")
      << ": " << writer->record_count() << " of " << mine.size() << " workloads, " << failing
      << " failing a gate, " << std::fixed << std::setprecision(1) << wall << " s"
      << std::defaultfloat << (complete ? "" : " (interrupted)") << "\n"
      << "Wrote " << path.string() << "\n";
  if (!complete) return exit_code::interrupted; // appended once resumed to the end
  if (const int h = append_to_history_if_asked(o.history, path, out, err)) return h;
  return failing ? exit_code::failures : exit_code::ok;
}

} // namespace kg
