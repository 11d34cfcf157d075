// fp64 oracles of the decode-shaped ops (the Qwen3-4B stack of the workload issue).
//
// Tolerances, one line each:
// - linear (bf16 out): atol 2e-4 rtol 1.6e-2, as matmul: the output rounding to bf16 costs <= 2^-8
//   relative; fp32 accumulation over K <= 9728 unit-variance terms is off by ~2e-5.
#include <stdexcept>

#include "oracles/task_oracles.h"

namespace kg {
namespace {

// y[b, n] = sum_k x[b, k] w[n, k] (x: [B, K], w: [N, K]): a decode GEMV / skinny GEMM.
std::vector<host_tensor> linear(const task_def& t, const task_shape& s,
                                const std::vector<host_tensor>& in) {
  auto y = oracle_output(t, s, 0);
  const auto& x = in[0];
  const auto& w = in[1];
  if (x.shape.size() != 2 || w.shape.size() != 2 || x.shape[1] != w.shape[1])
    throw std::invalid_argument("linear: needs x (B, K) and w (N, K)");
  const std::int64_t b = x.shape[0], n = w.shape[0], k = x.shape[1];
  const auto xd = x.to_doubles(), wd = w.to_doubles();
  for (std::int64_t i = 0; i < b; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double acc = 0;
      const double* xr = xd.data() + i * k;
      const double* wr = wd.data() + j * k;
      for (std::int64_t p = 0; p < k; ++p)
        acc += xr[p] * wr[p];
      y.set(i * n + j, acc);
    }
  return {y};
}

} // namespace

void register_decode_oracles() {
  register_task_oracle("linear", linear);
}

} // namespace kg
