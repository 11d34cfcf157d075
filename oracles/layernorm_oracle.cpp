#include "oracles/layernorm_oracle.h"

#include <Eigen/Dense>

namespace kg {

namespace {
using matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

matrix as_matrix(const host_tensor& t, std::int64_t rows, std::int64_t cols) {
  matrix m(rows, cols);
  for (std::int64_t i = 0; i < rows * cols; ++i)
    m.data()[i] = t.at(i);
  return m;
}

// Row-wise (u - mean) / sqrt(var + eps), population variance, two-pass in double.
matrix normalize(const matrix& u, double eps) {
  const Eigen::VectorXd mean = u.rowwise().mean();
  matrix centered = u.colwise() - mean;
  const Eigen::VectorXd var = centered.array().square().rowwise().mean();
  const Eigen::VectorXd inv = (var.array() + eps).rsqrt();
  return centered.array().colwise() * inv.array();
}
} // namespace

host_tensor layernorm_oracle_fp64(const layernorm_inputs& in, double eps, affine_formula f) {
  const std::int64_t rows = in.x.shape.at(0), cols = in.x.shape.at(1);
  const matrix x = as_matrix(in.x, rows, cols);
  const Eigen::RowVectorXd w = as_matrix(in.weight, 1, cols).row(0);
  const Eigen::RowVectorXd b = as_matrix(in.bias, 1, cols).row(0);
  auto affine = [&](const matrix& z) -> matrix {
    return (z.array().rowwise() * w.array()).rowwise() + b.array();
  };
  matrix y;
  switch (f) {
  case affine_formula::reference:
    y = affine(normalize(x, eps));
    break;
  case affine_formula::omit_all:
    y = normalize(x, eps);
    break;
  case affine_formula::omit_weight:
    y = normalize(x, eps).rowwise() + b;
    break;
  case affine_formula::omit_bias:
    y = normalize(x, eps).array().rowwise() * w.array();
    break;
  case affine_formula::scalar_affine:
    y = (normalize(x, eps).array() * w(0) + b(0)).matrix();
    break;
  case affine_formula::affine_twice:
    y = affine(affine(normalize(x, eps)));
    break;
  case affine_formula::affine_before_norm:
    y = normalize(affine(x), eps);
    break;
  }
  host_tensor out(dtype::float64, in.x.shape);
  for (std::int64_t i = 0; i < rows * cols; ++i)
    out.set(i, y.data()[i]);
  return out;
}

} // namespace kg
