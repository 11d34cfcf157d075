// Input generators by role. A role says what an input is for (activation, normalization weight,
// normalization bias, index), because what a test can detect depends on it: a norm weight of all
// ones cannot reveal a kernel that ignores the weight.
#pragma once

#include <cstdint>
#include <string_view>

#include "workloads/tensor.h"

namespace kg {

enum class activation_kind {
  normal,    // N(0, 1): signed, what SOL-ExecBench and kernelgate's strict protocol draw
  uniform01, // U[0, 1): torch.rand, what KernelBench's get_inputs() draws (never negative)
};
std::string_view activation_kind_name(activation_kind k);

enum class param_regime {
  identity, // weight 1, bias 0: LibTorch's module defaults and SOL-ExecBench's by-name generator
  varied,   // weight 1 + 0.1 N(0,1), bias 0.1 N(0,1): every element distinct from the identity
  normal,   // N(0,1): a generic random input, as FlashInfer-Bench's random source draws
};
std::string_view param_regime_name(param_regime r);

// Values are drawn in double and rounded once to the dtype.
host_tensor make_activation(dtype t, std::vector<std::int64_t> shape, activation_kind kind,
                            std::uint64_t seed, std::string_view role = "x");
// Each element multiplied by factor, then rounded to the tensor's dtype (KernelBench-Verified's
// hidden inputs are the originals scaled by 1, 3, 0.01 and -1).
host_tensor scaled(const host_tensor& t, double factor);
host_tensor make_norm_weight(dtype t, std::int64_t n, param_regime regime, std::uint64_t seed,
                             std::string_view role = "weight");
host_tensor make_norm_bias(dtype t, std::int64_t n, param_regime regime, std::uint64_t seed,
                           std::string_view role = "bias");
// Uniform integers in [0, upper) stored as t (int32 or int64): gather indices, class targets.
host_tensor make_indices(dtype t, std::vector<std::int64_t> shape, std::int64_t upper,
                         std::uint64_t seed, std::string_view role = "indices");

} // namespace kg
