// The LibTorch reference of each catalog op, run on the CPU: what a KernelBench-style checker
// compares candidates with. kernelgate checks it against the fp64 oracle with the task's own
// tolerance; a reference that fails is INVALID_REFERENCE, and the task's candidates are not judged
// against a broken yardstick. Eager and unfused, in the tensors' dtypes, as the task's
// "reference" field writes it (each op rounds to its dtype). No LibTorch header leaks out.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <functional>

#include <cuda_runtime_api.h>

#include "kernels/abi/kg_candidate.h"
#include "workloads/task.h"

namespace kg {

struct torch_reference_result {
  std::vector<host_tensor> outputs; // in the task's output dtypes
  std::string error;                // non-empty: LibTorch refused (e.g. an op without a CPU kernel)
};

bool has_torch_reference(std::string_view op);
// nullopt: no reference registered for the op.
std::optional<torch_reference_result> run_torch_reference(const task_def& t,
                                                          const std::vector<host_tensor>& inputs);

// One LibTorch CPU thread per op from now on, in this process: eval computes many trials at once,
// one per core, and each op fanning out over every core on top of that oversubscribes them (the
// spinning OpenMP threads then cost more than the ops).
void use_one_torch_cpu_thread();

// LibTorch's version string (TORCH_VERSION).
std::string torch_version();

// The reference on the GPU, for timing it as KernelBench times its baseline: `run` queues the
// op on the stream given, reading CUDA tensors that view `in` (not copied; `in` must outlive
// it). Empty `run` and a reason when there is none: an op without a reference, LibTorch built
// without CUDA (the CPU machines' 1.13), or no device.
struct torch_cuda_reference {
  std::function<void(cudaStream_t)> run;
  std::string error;
};
torch_cuda_reference make_torch_cuda_reference(std::string_view op, const nlohmann::json& params,
                                               const kg_tensor* in, int n_in);

} // namespace kg
