// The LoRA training workloads of `kernelgate workload run`.
#pragma once

#include <string>

#include "suite/workload_result.h"

namespace kg {

// LoRA rank-4 on q and v of a 2-layer Qwen3-shaped model, `jobs` jobs over one frozen base, float32
// on `device`; every step gated against the fp64 finite-difference reference.
workload_result run_lora_small(const std::string& device, int steps, int jobs);

// LoRA rank-8 on q and v of Qwen3-4B, bfloat16 on the GPU; the first loss gated against a float32
// recomputation.
workload_result run_lora_qwen3_4b(int steps, int jobs);

} // namespace kg
