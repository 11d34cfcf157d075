// fp64 oracles: softmax and normalizations over the last dimension.
#include "oracles/task_ops_common.h"
#include <cmath>

#include "oracles/task_oracles.h"

namespace kg {
namespace {

using task_ops::rows_cols;

std::vector<host_tensor> softmax(const task_def& t, const task_shape& s,
                                 const std::vector<host_tensor>& in) {
  auto y = oracle_output(t, s, 0);
  const auto [rows, cols] = rows_cols(in[0]);
  for (std::int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY, sum = 0;
    for (std::int64_t c = 0; c < cols; ++c)
      m = std::max(m, in[0].at(r * cols + c));
    for (std::int64_t c = 0; c < cols; ++c)
      sum += std::exp(in[0].at(r * cols + c) - m);
    for (std::int64_t c = 0; c < cols; ++c)
      y.set(r * cols + c, std::exp(in[0].at(r * cols + c) - m) / sum);
  }
  return {y};
}

// y = x / sqrt(mean(x^2) + eps) * w, row by row.
void rmsnorm_rows(const std::vector<double>& x, const host_tensor& w, double eps, std::int64_t rows,
                  std::int64_t cols, host_tensor& y) {
  for (std::int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (std::int64_t c = 0; c < cols; ++c)
      ss += x[r * cols + c] * x[r * cols + c];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(cols) + eps);
    for (std::int64_t c = 0; c < cols; ++c)
      y.set(r * cols + c, x[r * cols + c] * inv * w.at(c));
  }
}

std::vector<host_tensor> rmsnorm(const task_def& t, const task_shape& s,
                                 const std::vector<host_tensor>& in) {
  auto y = oracle_output(t, s, 0);
  const auto [rows, cols] = rows_cols(in[0]);
  rmsnorm_rows(in[0].to_doubles(), in[1], t.params.value("eps", 1e-6), rows, cols, y);
  return {y};
}

// h = x + residual as the unfused pair stores it (rounded to h's dtype: the next op reads the
// stored sum), then y = rmsnorm(h) * weight.
std::vector<host_tensor> residual_add_rmsnorm(const task_def& t, const task_shape& s,
                                              const std::vector<host_tensor>& in) {
  auto h = oracle_output(t, s, 0);
  auto y = oracle_output(t, s, 1);
  const auto [rows, cols] = rows_cols(in[0]);
  host_tensor stored(t.outputs[0].type, h.shape);
  for (std::int64_t i = 0; i < h.numel(); ++i) {
    h.set(i, in[0].at(i) + in[1].at(i));
    stored.set(i, in[0].at(i) + in[1].at(i));
  }
  rmsnorm_rows(stored.to_doubles(), in[2], t.params.value("eps", 1e-6), rows, cols, y);
  return {h, y};
}

} // namespace

void register_norm_oracles() {
  register_task_oracle("softmax", softmax);
  register_task_oracle("rmsnorm", rmsnorm);
  register_task_oracle("residual_add_rmsnorm", residual_add_rmsnorm);
}

} // namespace kg
