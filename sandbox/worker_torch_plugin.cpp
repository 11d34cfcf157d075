// The plugin that gives `kg_worker` its LibTorch reference (sandbox/worker_torch.h): LibTorch and
// the catalog's references (kernels/task_torch_refs.cpp, compiled into the plugin) loaded only
// when a manifest asks for a reference to be timed.
#include <exception>
#include <string>
#include <type_traits>

#include "sandbox/worker_torch.h"

extern "C" __attribute__((visibility("default"))) void
kg_worker_torch_reference(const char* op, std::size_t op_size, const nlohmann::json* params,
                          const kg_tensor* in, int n_in, kg::torch_cuda_reference* out) {
  try {
    *out = kg::make_torch_cuda_reference(std::string_view(op, op_size), *params, in, n_in);
  } catch (const std::exception& e) { // nothing may unwind into the worker through dlsym's door
    out->run = nullptr;
    out->error = std::string("LibTorch: ") + e.what();
  }
}

// Checked at compile time: the entry matches the type the worker calls it through.
static_assert(std::is_same_v<decltype(&kg_worker_torch_reference), kg::worker_torch_plugin_fn>);
