// A LayerNorm backend computes the correct formula and each altered formula on host tensors, in
// the dtype of x, with the reference's arithmetic: normalize, round to the dtype, then multiply
// and add with a rounding to the dtype after each operation (what eager LibTorch does).
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "mutants/affine_formula.h"
#include "workloads/layernorm_affine.h"

namespace kg {

// Thrown when a backend cannot run on this machine (no GPU, no driver): a documented exit code,
// not a crash.
struct backend_unavailable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class layernorm_backend {
public:
  virtual ~layernorm_backend() = default;
  virtual std::string name() const = 0;
  // y = formula(x, weight, bias), shape and dtype of x.
  virtual host_tensor run(affine_formula f, const layernorm_inputs& in, double eps) = 0;
  // A second, independently written correct LayerNorm (other algorithm, one final rounding).
  virtual host_tensor run_independent(const layernorm_inputs& in, double eps) = 0;
  // What a reader needs to know about how this backend computes (paths, versions, kernels).
  virtual nlohmann::json describe() const = 0;
};

// How the LibTorch backend obtains layer_norm(x) for float16 inputs. LibTorch 1.13 has no CPU
// float16 layer_norm; later versions do.
enum class half_norm_path { automatic, native, float32_then_cast, float64_then_cast };
std::string_view half_norm_path_name(half_norm_path p);

std::unique_ptr<layernorm_backend> make_torch_layernorm_backend(half_norm_path p);
// Throws backend_unavailable where no CUDA device can be used.
std::unique_ptr<layernorm_backend> make_cuda_layernorm_backend();

// The independent correct implementation in plain C++ (Welford in float, fused affine, one cast):
// the CPU backend's second control.
host_tensor layernorm_host_independent(const layernorm_inputs& in, double eps);

} // namespace kg
