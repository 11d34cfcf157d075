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

} // namespace kg
