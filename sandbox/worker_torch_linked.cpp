// `kernelgate worker`'s LibTorch reference: the binary links LibTorch anyway.
#include "sandbox/worker_torch.h"

namespace kg {

torch_cuda_reference worker_torch_reference(std::string_view op, const nlohmann::json& params,
                                            const kg_tensor* in, int n_in) {
  return make_torch_cuda_reference(op, params, in, n_in);
}

} // namespace kg
