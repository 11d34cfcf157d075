#include "suite/role_override.h"

#include <algorithm>
#include <fstream>
#include <iterator>

#include <dlfcn.h>

#include "kernels/abi/kg_candidate.h"
#include "base/sha256.h"
#include "sandbox/candidate_compiler.h"

namespace kg {

const std::vector<std::string>& overridable_roles() {
  static const std::vector<std::string> r = {"gemv.qkv", "gemv.o_proj", "gemv.gate_up", "gemv.down",
                                             "gemv.lm_head"};
  return r;
}

namespace {

kg_tensor view(const void* p, std::int64_t rows, std::int64_t cols) {
  kg_tensor t{};
  t.data = const_cast<void*>(p);
  t.dtype = KG_BFLOAT16;
  t.ndim = 2;
  t.shape[0] = rows;
  t.shape[1] = cols;
  t.strides[0] = cols;
  t.strides[1] = 1;
  return t;
}

} // namespace

cudaError_t role_override::launch(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                                  int batch, int n, int k, cudaStream_t s) const {
  const kg_tensor in[2] = {view(x, batch, k), view(w, n, k)};
  kg_tensor out[1] = {view(y, batch, n)};
  const int rc = run(in, 2, out, 1, s);
  if (rc != 0) return cudaErrorLaunchFailure;
  return cudaPeekAtLastError();
}

role_override load_role_override(const std::string& spec) {
  const auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    throw override_error("--override '" + spec + "': expected ROLE=FILE.cu");
  role_override o;
  o.role = spec.substr(0, eq);
  o.source = spec.substr(eq + 1);
  const auto& known = overridable_roles();
  if (std::find(known.begin(), known.end(), o.role) == known.end()) {
    std::string list;
    for (const auto& r : known)
      list += (list.empty() ? "" : ", ") + r;
    throw override_error("--override: role '" + o.role + "' cannot be overridden (roles: " + list +
                         ")");
  }
  o.projection = o.role.substr(o.role.find('.') + 1);
  std::ifstream in(o.source, std::ios::binary);
  if (!in) throw override_error("--override " + o.role + ": cannot read " + o.source.string());
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  o.sha256 = sha256_hex(bytes);
  const auto c = compile_candidate(o.source, {});
  if (!c.ok) {
    std::string first = c.log.substr(0, c.log.find('\n'));
    for (auto pos = c.log.find("error"); pos != std::string::npos;) { // the first error line
      const auto start = c.log.rfind('\n', pos);
      const auto end = c.log.find('\n', pos);
      first = c.log.substr(start == std::string::npos ? 0 : start + 1,
                           end == std::string::npos ? std::string::npos : end - start - 1);
      break;
    }
    throw override_error("--override " + o.role + ": " + o.source.string() +
                         " does not compile: " + first);
  }
  o.shared_object = c.shared_object;
  void* so = ::dlopen(c.shared_object.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!so)
    throw override_error("--override " + o.role + ": cannot load " + c.shared_object.string() +
                         ": " + ::dlerror());
  o.handle = std::shared_ptr<void>(so, [](void* h) { ::dlclose(h); });
  o.run = reinterpret_cast<role_override::kg_run_fn>(::dlsym(so, "kg_run"));
  if (!o.run)
    throw override_error("--override " + o.role + ": " + o.source.string() +
                         " defines no kg_run (kernels/abi/kg_candidate.h)");
  return o;
}

} // namespace kg
