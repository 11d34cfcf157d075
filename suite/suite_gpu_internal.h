// Shared by the suite's GPU executors (suite_gpu.cpp, suite_kernel_workloads.cpp,
// suite_engine_workloads.cpp); not a public header.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpu/cuda_raii.h"
#include "gpu/green_partition.h"
#include "gpu/nvml.h"
#include "kernels/decode/decode_engine.h"
#include "suite/suite_gpu.h"
#include "suite/tenants.h"
#include "timing/gpu_timer.h"
#include "workloads/step_cost_model.h"

namespace kg {

// A LoRA training step of one job from its initial state (the training gates' references).
struct lora_step_reference {
  double loss = 0;
  std::vector<double> grad, params_after; // lora_adapters::flat() order
};

struct suite_gpu_session::impl {
  suite_gpu_settings settings;
  std::string group; // the set-up in place
  nlohmann::json setups = nlohmann::json::array();
  std::optional<double> copy_gbps_value;
  std::unique_ptr<nvml_session> nvml; // the clock watch's, opened at the first workload it watches
  std::unique_ptr<gpu_timer> timer;
  // engine.* groups
  std::unique_ptr<cuda_stream> whole_stream;
  std::optional<green_partition> partition;
  nlohmann::json partition_record;
  std::unique_ptr<background_hog> hog;
  std::unique_ptr<background_training> training;
  int training_jobs = 0;
  std::unique_ptr<decode_engine> engine;
  // Logits of the engine alone on the whole GPU per (batch, context): the co-located gate's
  // reference.
  std::map<std::pair<int, int>, std::vector<std::uint16_t>> solo_logits;
  // Per job: the same step by a bf16 trainer with the job alone on the whole GPU (the gates'
  // reference), and by an fp32 trainer (the precision check).
  std::map<int, lora_step_reference> lora_reference_by_job, lora_fp32_by_job;
  void ensure_lora_references(int job);
  // The serving warm-ups' step cost models, measured once per (context, chunk) in the set-up in
  // place (its tenant running): the workloads of one set-up share its conditions.
  std::map<std::pair<std::int64_t, std::int64_t>, step_cost_model> step_costs;

  double copy_gbps(); // the measured ceiling, once per run (1 GiB device copy)
  gpu_timer& kernel_timer();
  void log(const std::string& line) const;
  void enter_group(const std::string& name);
  void leave_group();
  decode_engine& current_engine();
};

// Kernel level: gemv, attention, rmsnorm, add_rmsnorm, qk_norm_rope, silu_mul, argmax, embedding,
// lora_gemm.
measured_workload run_kernel_workload(suite_gpu_session::impl& s, const suite_workload& w);
// Step, serving and training levels.
measured_workload run_decode_step_workload(suite_gpu_session::impl& s, const suite_workload& w);
measured_workload run_serving_workload(suite_gpu_session::impl& s, const suite_workload& w);
measured_workload run_training_workload(suite_gpu_session::impl& s, const suite_workload& w);

// Runs an override at batch 1, 2, 8 and 32 of its projection against the fp64 oracle; records
// each check in o.oracle; throws override_error at the first failure.
void check_gemv_override(role_override& o);

// The logits of one decode step at (batch, context): rows 0..batch-1 in slots 0..batch-1, each
// prefilled to `context`, decoding token (b x 7919 + 1) mod vocab at that position.
std::vector<std::uint16_t> logits_at_shape(decode_engine& e, int batch, int context);
// The step of job `job` (its initial adapters and batch) alone, in `dtype` ("bfloat16",
// "float32"), on LibTorch's current stream.
lora_step_reference lora_reference_step(int job, const char* dtype);

} // namespace kg
