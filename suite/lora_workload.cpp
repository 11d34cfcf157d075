// The LoRA workloads: rank-4 (small, CPU or GPU) and rank-8 (Qwen3-4B, GPU) training on q and v
// with LibTorch autograd, K jobs over one frozen base, each step timed and gated.
#include "suite/lora_workload.h"

#include <chrono>
#include <cmath>
#include <functional>
#include <sstream>

#include "stats/bootstrap.h"
#include "timing/interrupt.h"
#include "workloads/lora_model.h"
#include "workloads/lora_reference.h"
#include "workloads/lora_torch.h"

namespace kg {
namespace {

// Runs `steps` training steps of every job, timing each; `check(step, results)` adds gates.
std::vector<double>
timed_steps(lora_trainer& t, const std::vector<lora_batch>& batches, int steps, double lr,
            const std::function<void(int, const std::vector<lora_job_step>&)>& after) {
  std::vector<double> seconds;
  for (int s = 0; s < steps; ++s) {
    throw_if_stop_requested();
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = t.step(batches, lr); // reads the losses back: the step has finished
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    after(s, r);
  }
  return seconds;
}

} // namespace

workload_result run_lora_small(const std::string& device, int steps, int jobs) {
  const auto c = lora_small_config();
  const auto base = make_lora_base(c, 20261129);
  std::vector<lora_adapters> ref;
  std::vector<lora_batch> batches;
  for (int j = 0; j < jobs; ++j) {
    ref.push_back(make_lora_adapters(c, 20261129, j));
    batches.push_back(make_lora_batch(c, 20261129, j));
  }
  lora_trainer t(c, base, ref, {device, "float32"});
  const double lr = 0.5;
  double worst_loss = 0, worst_grad = 0;
  nlohmann::json losses = nlohmann::json::array();
  const auto seconds =
      timed_steps(t, batches, steps, lr, [&](int, const std::vector<lora_job_step>& r) {
        nlohmann::json row = nlohmann::json::array();
        for (std::size_t j = 0; j < ref.size(); ++j) {
          const double loss = lora_reference_loss(c, base, ref[j], batches[j]);
          const auto g = lora_reference_grad(c, base, ref[j], batches[j]);
          worst_loss = std::max(worst_loss, std::fabs(r[j].loss - loss) / loss);
          worst_grad = std::max(worst_grad, worst_relative_difference(r[j].grad, g, 1e-3));
          auto p = ref[j].flat();
          for (std::size_t k = 0; k < p.size(); ++k)
            p[k] -= lr * g[k];
          ref[j].set_flat(p);
          row.push_back(r[j].loss);
        }
        losses.push_back(row);
      });
  double worst_param = 0;
  const auto got = t.adapters();
  for (std::size_t j = 0; j < ref.size(); ++j)
    worst_param =
        std::max(worst_param, worst_relative_difference(got[j].flat(), ref[j].flat(), 1e-3));
  workload_result o;
  const auto step = bootstrap_median(seconds);
  o.metrics["step_seconds"] = interval_json(step);
  o.metrics["tokens_per_second"] = static_cast<double>(jobs * c.seq) / step.estimate;
  o.metrics["losses_by_step"] = losses;
  o.metrics["sol_fraction"] = "n/a: no measured ceiling for this model size";
  auto add = [&](const std::string& name, double worst, double rtol) {
    std::ostringstream d;
    d << "worst relative difference " << worst << " (limit " << rtol << ")";
    o.gates.push_back({name, worst <= rtol, d.str()});
  };
  add("loss vs fp64 reference, every step and job", worst_loss, 1e-3);
  add("adapter gradients vs fp64 finite differences", worst_grad, 1e-2);
  add("adapters after training vs reference SGD", worst_param, 1e-2);
  return o;
}

workload_result run_lora_qwen3_4b(int steps, int jobs) {
  lora_config c; // Qwen3-4B, rank 8, sequence 2048; the base drawn on the GPU (8 GB in bf16)
  const std::uint64_t base_seed = 20261129;
  std::vector<lora_adapters> adapters;
  std::vector<lora_batch> batches;
  for (int j = 0; j < jobs; ++j) {
    adapters.push_back(make_lora_adapters(c, 20261129, j));
    batches.push_back(make_lora_batch(c, 20261129, j));
  }
  workload_result o;
  double first_bf16 = 0;
  {
    lora_trainer t(c, base_seed, adapters, {"cuda", "bfloat16"});
    nlohmann::json losses = nlohmann::json::array();
    const auto seconds =
        timed_steps(t, batches, steps, 1e-3, [&](int s, const std::vector<lora_job_step>& r) {
          if (s == 0) first_bf16 = r[0].loss;
          nlohmann::json row = nlohmann::json::array();
          for (const auto& x : r)
            row.push_back(x.loss);
          losses.push_back(row);
        });
    const auto step = bootstrap_median(seconds);
    o.metrics["step_seconds"] = interval_json(step);
    o.metrics["tokens_per_second"] = static_cast<double>(jobs * c.seq) / step.estimate;
    o.metrics["losses_by_step"] = losses;
  }
  lora_trainer f32(c, base_seed, {adapters[0]}, {"cuda", "float32"});
  const double first_f32 = f32.step({batches[0]}, 0.0)[0].loss;
  const double rel = std::fabs(first_bf16 - first_f32) / first_f32;
  std::ostringstream d;
  d << "bf16 " << first_bf16 << " vs float32 " << first_f32 << ": relative " << rel
    << " (limit 0.02)";
  o.gates.push_back({"first loss, bfloat16 vs float32", rel <= 2e-2, d.str()});
  o.metrics["sol_fraction"] = "n/a: no training roofline yet";
  return o;
}

} // namespace kg
