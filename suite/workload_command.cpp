// The workloads of the Qwen3-4B stack (issue: workloads under test) that run today: LoRA rank-8
// training on q and v with LibTorch autograd, K jobs over one frozen base; and the Qwen3-4B BF16
// decode engine alone on the GPU, beside a bandwidth hog and beside the LoRA training in green
// contexts (suite/decode_workload.h). Each run prints its
// metrics with intervals and its gate verdicts and writes a `workload` result.
#include "suite/workload_command.h"
#include "reports/json_input.h"
#include "timing/interrupt.h"

#include <cmath>
#include <iomanip>
#include <map>
#include <sstream>

#include "gpu/device_info.h"
#include "reports/environment.h"
#include "reports/result_writer.h"
#include "suite/decode_workload.h"
#include "suite/exit_codes.h"
#include "suite/lora_workload.h"
#include "workloads/lora_torch.h"

namespace kg {
namespace {

struct workload_def {
  const char* id;
  const char* what;
  bool gpu_only;
};

constexpr workload_def workloads[] = {
    {"lora-train-small",
     "LoRA rank-4 on q and v of a 2-layer Qwen3-shaped model (hidden 32, 12 tokens), --jobs jobs "
     "(default 2), float32; every step gated against the fp64 finite-difference reference (loss "
     "rtol 1e-3, gradients and adapters rtol 1e-2)",
     false},
    {"lora-train-qwen3-4b",
     "LoRA rank-8 on q and v of Qwen3-4B (36 layers, random weights), sequence 2048, --jobs jobs "
     "(1..16, default 1), bfloat16 on the GPU; step time, tokens/s, and the first step's loss "
     "gated against a float32 recomputation (rtol 2e-2)",
     true},
    {"decode-qwen3-4b",
     "Qwen3-4B BF16 decode engine (36 layers, random weights, CUDA graphs) on all SMs: step "
     "latency at batch 1, context 2048 vs the bytes / measured copy bandwidth bound (--steps x 20 "
     "samples), and continuous-batching throughput at p99 ITL <= 50 ms (Poisson requests of "
     "1/2/4/8 sequences, contexts 512..8192, 256 outputs; loads from --start-rps (default 2) up "
     "5% a step, --trace-seconds (default 6) of arrivals each, at most 30 loads)",
     true},
    {"decode-colocated",
     "the Qwen3-4B decode engine on a green-context partition of >= 99 SMs with a memory-"
     "bandwidth hog on the other SMs, vs alone on the whole GPU and alone on the partition: "
     "batch-1 step latency (context 2048) and batch-32 tokens/s as fractions of solo; logits "
     "gated bit-identical to solo",
     true},
    {"decode-colocated-training",
     "the decode engine and LoRA rank-8 training of Qwen3-4B (bfloat16, stepping continuously) in "
     "two green contexts, the grant nearest 99 decode / 33 training SMs (recorded as granted): "
     "throughput at p99 ITL <= --itl-limit-ms (default 50) by the load search, solo on all SMs and "
     "co-located, then --repeats traces (default 5, other seeds) at each found load; "
     "fraction_of_solo = ratio of mean tokens/s with a bootstrap 95% interval; gated: logits "
     "bit-identical to solo at batch 1/4/8/32 x context 512/2048/8192, training losses finite, "
     "first loss vs float32 (rtol 2e-2)",
     true},
};

// The run phase: the workload's own runner.
workload_result run_workload(const std::string& id, bool gpu_only, const std::string& device,
                             int steps, int jobs, const decode_workload_options& dopt) {
  if (id == "decode-colocated") return run_decode_colocated(dopt);
  if (id == "decode-colocated-training") return run_decode_colocated_training(dopt);
  if (id == "decode-qwen3-4b") return run_decode_qwen3_4b(dopt);
  return gpu_only ? run_lora_qwen3_4b(steps, jobs) : run_lora_small(device, steps, jobs);
}

// The step time where one is timed, tokens/s, the SOL fraction, every other metric (long series
// only in the result file) and each gate.
void print_workload_result(std::ostream& out, const std::string& id, int jobs, int steps,
                           const workload_result& r) {
  out << "workload " << id << " (" << jobs << " job" << (jobs > 1 ? "s" : "") << ", " << steps
      << " steps)\n"
      << std::setprecision(4);
  // decode-colocated-training times no single step: its metrics are throughputs at the limit.
  if (r.metrics.contains("step_seconds")) {
    const auto& st = r.metrics["step_seconds"];
    out << "  step seconds  " << st["estimate"].get<double>() << "  [95% "
        << st["ci95"][0].get<double>() << ", " << st["ci95"][1].get<double>() << "]\n";
  }
  out << "  tokens/s      " << r.metrics["tokens_per_second"].get<double>() << "\n"
      << "  SOL fraction  "
      << (r.metrics["sol_fraction"].is_string() ? r.metrics["sol_fraction"].get<std::string>()
                                                : r.metrics["sol_fraction"].dump())
      << "\n";
  // Every other metric: scalars and small objects in full (fractions of solo, bounds, the
  // partition granted); long series (load points, contexts) only in the result file.
  for (const auto& [k, v] : r.metrics.items()) {
    if (k == "step_seconds" || k == "tokens_per_second" || k == "sol_fraction") continue;
    const std::string text = v.is_string() ? v.get<std::string>() : v.dump();
    out << "  " << k << ": "
        << (text.size() <= 240 ? text : "(" + std::to_string(v.size()) + " entries: result file)")
        << "\n";
  }
  for (const auto& g : r.gates)
    out << "  gate " << (g.pass ? "PASS " : "FAIL ") << g.name << ": " << g.detail << "\n";
}

} // namespace

void print_workload_list(std::ostream& out) {
  for (const auto& w : workloads)
    out << std::left << std::setw(27) << w.id << (w.gpu_only ? "[GPU] " : "      ") << w.what
        << "\n";
}

int run_workload_command(const workload_options& o, const std::vector<std::string>& args,
                         std::ostream& out, std::ostream& err) {
  const std::string& id = o.id;
  const workload_def* def = nullptr;
  for (const auto& w : workloads)
    if (id == w.id) def = &w;
  if (!def) {
    err << "kernelgate: unknown workload '" << printable(id) << "' (kernelgate workload list)\n";
    return exit_code::bad_input;
  }
  const int steps = o.steps;
  int jobs = o.jobs;
  const bool colocated_training = id == "decode-colocated-training";
  const bool decode = id == "decode-qwen3-4b" || id == "decode-colocated" || colocated_training;
  // Options of the decode workloads mean nothing to the others: refused, not ignored.
  if (!decode && !o.decode_options_given.empty()) {
    err << "kernelgate: " << o.decode_options_given.front()
        << " applies to the decode workloads, not to " << id << "\n";
    return exit_code::bad_input;
  }
  decode_workload_options dopt;
  if (decode) {
    dopt.start_rps = o.start_rps;
    dopt.trace_seconds = o.trace_seconds;
    dopt.itl_limit_ms = o.itl_limit_ms;
    dopt.max_load_steps = o.max_load_steps;
    dopt.repeats = o.repeats;
    dopt.latency_samples = 20 * steps;
    dopt.progress = &err;
  }
  if (def->gpu_only || o.device == "cuda") {
    const auto dev = query_device(0);
    if (!dev.available) {
      err << "kernelgate: workload " << id << " needs a GPU: " << dev.reason << "\n";
      return exit_code::unavailable;
    }
  }
  if (colocated_training) {
    // The training runs on a green context's stream: LibTorch must have CUDA (the GPU machine's
    // does; the CPU machines' 1.13 does not).
    if (const auto why = torch_external_stream_unavailable(); !why.empty()) {
      err << "kernelgate: workload " << id << " needs LibTorch with CUDA: " << why << "\n";
      return exit_code::unavailable;
    }
  }
  if (jobs == 0) jobs = def->gpu_only ? 1 : 2;
  const nlohmann::json config = {{"workload", id},
                                 {"description", def->what},
                                 {"device", def->gpu_only ? "cuda" : o.device},
                                 {"steps", steps},
                                 {"jobs", jobs},
                                 {"seed", 20261129}};
  nlohmann::json full_config = config;
  if (decode) {
    full_config["start_rps"] = dopt.start_rps;
    full_config["trace_seconds"] = dopt.trace_seconds;
    full_config["latency_samples"] = dopt.latency_samples;
    full_config["max_load_steps"] = dopt.max_load_steps;
    full_config["itl_limit_ms"] = dopt.itl_limit_ms;
    if (colocated_training) full_config["repeats"] = dopt.repeats;
  }
  std::unique_ptr<result_writer> writer;
  try {
    writer = std::make_unique<result_writer>(o.out, "workload", args, collect_environment(),
                                             full_config);
  } catch (const output_error& e) {
    err << "kernelgate: " << printable(e.what(), 400) << "\n";
    return exit_code::bad_input;
  }
  workload_result r;
  try {
    r = run_workload(id, def->gpu_only, o.device, steps, jobs, dopt);
  } catch (const std::exception& e) {
    // Interrupted (SIGINT/SIGTERM), or failed (a LibTorch or CUDA error): a record says so and
    // the result is still written, marked as what it is.
    const bool stopped = dynamic_cast<const interrupted_error*>(&e) != nullptr;
    writer->append({{"type", "workload"},
                    {"id", "workload/" + id},
                    {"workload", id},
                    {"error", e.what()},
                    {"gates", nlohmann::json::array()}});
    writer->finish({{"status", stopped ? "interrupted" : "failed"}});
    err << "kernelgate: workload " << id
        << (stopped ? " interrupted; partial result in " + printable(o.out)
                    : " failed: " + printable(e.what(), 400))
        << "\n";
    return stopped ? exit_code::interrupted : exit_code::failures;
  }
  nlohmann::json gates = nlohmann::json::array();
  bool all = true;
  for (const auto& g : r.gates) {
    gates.push_back({{"name", g.name}, {"pass", g.pass}, {"detail", g.detail}});
    all = all && g.pass;
  }
  writer->append({{"type", "workload"},
                  {"id", "workload/" + id},
                  {"workload", id},
                  {"metrics", r.metrics},
                  {"gates", gates}});
  const auto path = writer->finish({{"status", "complete"}, {"gates_passed", all}});
  print_workload_result(out, id, jobs, steps, r);
  out << "Wrote " << path.string() << "\n";
  return all ? exit_code::ok : exit_code::failures;
}

} // namespace kg
