#include "suite/audit.h"

#include <algorithm>
#include <array>
#include <ostream>

#include "kernels/layernorm_backend.h"
#include "oracles/protocol.h"
#include "reports/json_input.h"
#include "suite/exit_codes.h"

namespace kg {

int run_layernorm_affine_audit(const audit_request& req, const protocol& checker,
                               std::unique_ptr<layernorm_backend> backend, std::ostream& out,
                               std::ostream& err);

namespace {
constexpr std::array<std::string_view, 1> names = {"layernorm-affine"};
constexpr std::array<std::string_view, 2> backends = {"cpu", "cuda"};

std::string joined(std::span<const std::string_view> v) {
  std::string s;
  for (auto x : v)
    s += (s.empty() ? "" : ", ") + std::string(x);
  return s;
}
} // namespace

std::span<const std::string_view> audit_names() {
  return names;
}
std::span<const std::string_view> audit_backends() {
  return backends;
}

int run_audit(const audit_request& req, std::ostream& out, std::ostream& err) {
  if (std::find(names.begin(), names.end(), req.name) == names.end()) {
    err << "kernelgate: unknown audit '" << printable(req.name) << "' (known: " << joined(names)
        << ")\n";
    return exit_code::bad_input;
  }
  if (std::find(backends.begin(), backends.end(), req.backend) == backends.end()) {
    err << "kernelgate: unknown backend '" << printable(req.backend)
        << "' (known: " << joined(backends) << ")\n";
    return exit_code::bad_input;
  }
  const auto checker = find_protocol(req.protocol);
  if (!checker) {
    err << "kernelgate: unknown protocol '" << printable(req.protocol)
        << "' (known: " << joined(protocol_names()) << ")\n";
    return exit_code::bad_input;
  }
  std::unique_ptr<layernorm_backend> backend;
  try {
    backend = req.backend == "cuda" ? make_cuda_layernorm_backend()
                                    : make_torch_layernorm_backend(half_norm_path::automatic);
  } catch (const backend_unavailable& e) {
    err << "kernelgate: backend '" << req.backend << "' unavailable: " << e.what() << "\n";
    return exit_code::unavailable;
  }
  return run_layernorm_affine_audit(req, *checker, std::move(backend), out, err);
}

} // namespace kg
