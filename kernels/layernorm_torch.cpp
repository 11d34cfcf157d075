// The LibTorch (CPU) LayerNorm backend: the reference of the LayerNorm affine ablation
// (docs/architecture.md, The LayerNorm affine ablation; docs/cli.md), eager layer_norm(x, (N,),
// eps) without affine, then `* weight + bias` in the selected dtype. This is one of the two TUs
// that include LibTorch (each takes ~30 s to compile).
#include <cstring>

#include <torch/torch.h>

#include "kernels/layernorm_backend.h"
#include "kernels/torch_dtype.h"

namespace kg {
namespace {

// Does this LibTorch have a CPU float16 layer_norm? (1.13 does not; it raises.)
bool native_half_layer_norm() {
  try {
    auto x = torch::ones({1, 4}, torch::TensorOptions().dtype(torch::kHalf));
    (void)torch::layer_norm(x, {4}, {}, {}, 1e-5);
    return true;
  } catch (const c10::Error&) {
    return false;
  }
}

class torch_backend final : public layernorm_backend {
public:
  explicit torch_backend(half_norm_path p) : requested_(p) {
    native_available_ = native_half_layer_norm();
    path_ = p;
    if (p == half_norm_path::automatic)
      path_ = native_available_ ? half_norm_path::native : half_norm_path::float32_then_cast;
    if (path_ == half_norm_path::native && !native_available_)
      throw backend_unavailable("this LibTorch has no CPU float16 layer_norm");
  }

  std::string name() const override { return "cpu-libtorch"; }

  host_tensor run(affine_formula f, const layernorm_inputs& in, double eps) override {
    torch::NoGradGuard no_grad;
    const auto x = to_torch(in.x), w = to_torch(in.weight), b = to_torch(in.bias);
    const std::int64_t n = in.x.shape.back();
    auto norm = [&](const torch::Tensor& v) { return normalize(v, n, eps); };
    torch::Tensor y;
    switch (f) {
    case affine_formula::reference:
      y = norm(x) * w + b;
      break;
    case affine_formula::omit_all:
      y = norm(x);
      break;
    case affine_formula::omit_weight:
      y = norm(x) + b;
      break;
    case affine_formula::omit_bias:
      y = norm(x) * w;
      break;
    case affine_formula::scalar_affine:
      y = norm(x) * w[0] + b[0];
      break;
    case affine_formula::affine_twice:
      y = (norm(x) * w + b) * w + b;
      break;
    case affine_formula::affine_before_norm:
      y = norm(x * w + b);
      break;
    }
    return from_torch(y, in.x.type);
  }

  host_tensor run_independent(const layernorm_inputs& in, double eps) override {
    return layernorm_host_independent(in, eps);
  }

  nlohmann::json describe() const override {
    return {{"backend", name()},
            {"libtorch", TORCH_VERSION},
            {"reference", "eager layer_norm(x, (N,), eps) then * weight + bias in the dtype"},
            {"float16_layer_norm_native_available", native_available_},
            {"float16_normalization_requested", half_norm_path_name(requested_)},
            {"float16_normalization", half_norm_path_name(path_)},
            {"independent_control", "plain C++: Welford in float, fma affine, one cast"}};
  }

private:
  half_norm_path requested_;
  half_norm_path path_;
  bool native_available_ = false;

  torch::Tensor normalize(const torch::Tensor& x, std::int64_t n, double eps) const {
    if (x.scalar_type() != torch::kHalf || path_ == half_norm_path::native)
      return torch::layer_norm(x, {n}, {}, {}, eps);
    const auto wide = path_ == half_norm_path::float64_then_cast ? torch::kDouble : torch::kFloat;
    return torch::layer_norm(x.to(wide), {n}, {}, {}, eps).to(torch::kHalf);
  }
};

} // namespace

std::unique_ptr<layernorm_backend> make_torch_layernorm_backend(half_norm_path p) {
  return std::make_unique<torch_backend>(p);
}

} // namespace kg
