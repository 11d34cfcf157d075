// kernelgate dtype -> LibTorch scalar type, for the two TUs that include LibTorch.
#pragma once

#include <stdexcept>

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

} // namespace kg
