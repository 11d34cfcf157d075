// Helpers the fp64 task oracles (task_ops_*.cpp) share; not part of the oracles' public header.
#pragma once

#include <cmath>
#include <cstdint>
#include <utility>

#include "workloads/task.h"

namespace kg::task_ops {

// Rows of the last dimension of tensor `x`: (rows, cols).
inline std::pair<std::int64_t, std::int64_t> rows_cols(const host_tensor& x) {
  const std::int64_t cols = x.shape.back();
  return {x.numel() / cols, cols};
}

inline double silu(double x) {
  return x / (1.0 + std::exp(-x));
}

} // namespace kg::task_ops
