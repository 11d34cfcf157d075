// `kg_worker`'s LibTorch reference: the plugin beside the executable (KG_WORKER_TORCH_PLUGIN, built
// with it), loaded at the first reference a manifest asks for and kept for the process's life (the
// references' code lives in it). A worker that times none never loads LibTorch.
#include <dlfcn.h>

#include <filesystem>
#include <string>

#include "sandbox/worker_torch.h"

namespace kg {
namespace {

struct torch_plugin {
  worker_torch_plugin_fn fn = nullptr;
  std::string error;
};

const torch_plugin& plugin() {
  static const torch_plugin p = [] {
    torch_plugin r;
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    const auto path = exe.parent_path() / KG_WORKER_TORCH_PLUGIN;
    void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* why = ::dlerror();
      r.error = "cannot load the LibTorch plugin " + path.string() + ": " + (why ? why : "?");
      return r;
    }
    r.fn = reinterpret_cast<worker_torch_plugin_fn>(::dlsym(h, worker_torch_plugin_symbol));
    if (!r.fn) r.error = path.string() + " has no " + worker_torch_plugin_symbol;
    return r;
  }();
  return p;
}

} // namespace

torch_cuda_reference worker_torch_reference(std::string_view op, const nlohmann::json& params,
                                            const kg_tensor* in, int n_in) {
  torch_cuda_reference r;
  const auto& p = plugin();
  if (!p.fn) {
    r.error = p.error;
    return r;
  }
  p.fn(op.data(), op.size(), &params, in, n_in, &r);
  return r;
}

} // namespace kg
