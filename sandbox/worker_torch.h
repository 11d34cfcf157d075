// The LibTorch reference that `kernelgate eval` times beside a candidate (worker_timing.cpp),
// behind one function so that the worker's own code needs no LibTorch. Two definitions, one per
// executable: `kernelgate worker` links LibTorch and calls it directly
// (worker_torch_linked.cpp); the slim `kg_worker` loads it on first use from the plugin beside
// its executable (worker_torch_loader.cpp, worker_torch_plugin.cpp), so the many worker processes
// that never time a reference (every audit worker, every restart after a crash) never load
// LibTorch, cuBLAS or cuBLASLt.
#pragma once

#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

#include "kernels/abi/kg_candidate.h"
#include "kernels/task_torch_refs.h"

namespace kg {

torch_cuda_reference worker_torch_reference(std::string_view op, const nlohmann::json& params,
                                            const kg_tensor* in, int n_in);

// The plugin's one entry point (C linkage: looked up with dlsym). Fills `out`; never throws.
using worker_torch_plugin_fn = void (*)(const char* op, std::size_t op_size,
                                        const nlohmann::json* params, const kg_tensor* in, int n_in,
                                        torch_cuda_reference* out);
inline constexpr const char* worker_torch_plugin_symbol = "kg_worker_torch_reference";

} // namespace kg
