// The CUDA LayerNorm backend: the correct kernel, the six altered kernels and the independent
// kernel of kernels/layernorm_affine.cu, behind the common backend interface.
#include "kernels/layernorm_affine_cuda.h"
#include "kernels/layernorm_backend.h"
#include "gpu/cuda_check.h"

namespace kg {
namespace {

class cuda_backend final : public layernorm_backend {
public:
  cuda_backend() {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess)
      throw backend_unavailable(std::string("no usable CUDA device: ") + cudaGetErrorString(e));
    if (count == 0) throw backend_unavailable("no usable CUDA device: none found");
    cudaDeviceProp prop{};
    KG_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    device_ = prop.name;
    cc_ = std::to_string(prop.major) + "." + std::to_string(prop.minor);
    if (prop.major != 9)
      throw backend_unavailable("the kernels are built for sm_90a; device 0 is " + device_ +
                                " (compute capability " + cc_ + ")");
  }

  std::string name() const override { return "cuda"; }

  host_tensor run(affine_formula f, const layernorm_inputs& in, double eps) override {
    return run_layernorm_cuda(f, false, in, eps);
  }
  host_tensor run_independent(const layernorm_inputs& in, double eps) override {
    return run_layernorm_cuda(affine_formula::reference, true, in, eps);
  }

  nlohmann::json describe() const override {
    return {{"backend", name()},
            {"device", device_},
            {"compute_capability", cc_},
            {"reference", "kernels/layernorm_affine.cu: block per row, two-pass float statistics, "
                          "rounding to the dtype after normalization and after each affine op"},
            {"float16_normalization", "float32_then_cast"},
            {"independent_control", "kernels/layernorm_affine.cu: warp per row, Welford with "
                                    "Chan merge, fma affine, one rounding"}};
  }

private:
  std::string device_, cc_;
};

} // namespace

std::unique_ptr<layernorm_backend> make_cuda_layernorm_backend() {
  return std::make_unique<cuda_backend>();
}

} // namespace kg
