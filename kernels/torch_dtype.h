// kernelgate dtypes and tensors <-> LibTorch's, for the two TUs that include LibTorch.
#pragma once

#include <cstring>
#include <stdexcept>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/ScalarType.h>

#include "workloads/tensor.h"

namespace kg {

inline c10::ScalarType torch_scalar_type(dtype t) {
  switch (t) {
  case dtype::float32:
    return c10::kFloat;
  case dtype::float16:
    return c10::kHalf;
  case dtype::bfloat16:
    return c10::kBFloat16;
  case dtype::float64:
    return c10::kDouble;
  case dtype::int32:
    return c10::kInt;
  case dtype::int64:
    return c10::kLong;
  }
  throw std::invalid_argument("unsupported dtype");
}

// A CPU tensor holding a copy of `h`'s bytes.
inline at::Tensor to_torch(const host_tensor& h) {
  auto t = at::empty(h.shape, at::TensorOptions().dtype(torch_scalar_type(h.type)));
  std::memcpy(t.data_ptr(), h.bytes.data(), h.bytes.size());
  return t;
}

// `t` converted to `type`, made contiguous and, when `shape` is given, reshaped to it (a 0-d
// shape included).
inline host_tensor from_torch(const at::Tensor& t, dtype type,
                              const std::vector<std::int64_t>* shape = nullptr) {
  auto c = t.to(torch_scalar_type(type)).contiguous();
  if (shape) c = c.reshape(*shape);
  host_tensor h(type, std::vector<std::int64_t>(c.sizes().begin(), c.sizes().end()));
  std::memcpy(h.bytes.data(), c.data_ptr(), h.bytes.size());
  return h;
}

} // namespace kg
