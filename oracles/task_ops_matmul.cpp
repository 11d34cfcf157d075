// fp64 oracles of the single-op matrix tasks: matmul, batched matmul, matrix-vector product and
// scaled-dot-product attention. Inputs are converted to double once (to_doubles) and multiplied
// in i-k-j order so the inner loop runs over contiguous memory (the largest task shape is ~1.5e8
// multiply-adds: well under a second single-threaded).
//
// Tolerances of the tasks that use these ops, one line each:
// - matmul, bmm, gemv (bf16 out): atol 2e-4 rtol 1.6e-2: rounding to bf16 costs <= 2^-8 relative
//   (rtol is two bf16 ulps); fp32 accumulation over K <= 4096 terms of a unit-variance sum is
//   off by ~1e-5, truncating tensor-core adds included; fp16 accumulation (~2e-3 near zero)
//   and zeros fail.
// - sdpa (fp32): atol 5e-6 rtol 5e-5: fp32 scores, exp and weighted sums are off by ~1e-6
//   (outputs ~0.1); q, k, v rounded to fp16 or TF32 move the outputs by ~2e-5.
#include <cmath>
#include <stdexcept>

#include "oracles/task_oracles.h"

namespace kg {
namespace {

using tensors = std::vector<host_tensor>;

// c[m, n] = sum_k a[m, k] b[k, n] for one (M, K) x (K, N) pair, accumulated into c (zeroed).
void matmul_into(const double* a, const double* b, double* c, std::int64_t m, std::int64_t k,
                 std::int64_t n) {
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t p = 0; p < k; ++p) {
      const double av = a[i * k + p];
      const double* brow = b + p * n;
      double* crow = c + i * n;
      for (std::int64_t j = 0; j < n; ++j)
        crow[j] += av * brow[j];
    }
}

tensors matmul(const task_def& t, const task_shape& s, const tensors& in) {
  auto y = oracle_output(t, s, 0);
  if (in[0].shape.size() != 2 || in[1].shape.size() != 2 || in[0].shape[1] != in[1].shape[0])
    throw std::invalid_argument("matmul: needs a (M, K) and b (K, N)");
  const std::int64_t m = in[0].shape[0], k = in[0].shape[1], n = in[1].shape[1];
  std::vector<double> c(static_cast<std::size_t>(m * n), 0.0);
  matmul_into(in[0].to_doubles().data(), in[1].to_doubles().data(), c.data(), m, k, n);
  for (std::int64_t i = 0; i < m * n; ++i)
    y.set(i, c[i]);
  return {y};
}

tensors bmm(const task_def& t, const task_shape& s, const tensors& in) {
  auto y = oracle_output(t, s, 0);
  const auto &as = in[0].shape, &bs = in[1].shape;
  if (as.size() != 3 || bs.size() != 3 || as[0] != bs[0] || as[2] != bs[1])
    throw std::invalid_argument("bmm: needs a (B, M, K) and b (B, K, N)");
  const std::int64_t batch = as[0], m = as[1], k = as[2], n = bs[2];
  const auto a = in[0].to_doubles(), b = in[1].to_doubles();
  std::vector<double> c(static_cast<std::size_t>(batch * m * n), 0.0);
  for (std::int64_t z = 0; z < batch; ++z)
    matmul_into(a.data() + z * m * k, b.data() + z * k * n, c.data() + z * m * n, m, k, n);
  for (std::int64_t i = 0; i < batch * m * n; ++i)
    y.set(i, c[i]);
  return {y};
}

// y[n] = sum_k w[n, k] x[k].
tensors gemv(const task_def& t, const task_shape& s, const tensors& in) {
  auto y = oracle_output(t, s, 0);
  if (in[0].shape.size() != 2 || in[1].numel() != in[0].shape[1])
    throw std::invalid_argument("gemv: needs w (N, K) and x (K)");
  const std::int64_t n = in[0].shape[0], k = in[0].shape[1];
  const auto w = in[0].to_doubles(), x = in[1].to_doubles();
  for (std::int64_t r = 0; r < n; ++r) {
    double acc = 0;
    for (std::int64_t p = 0; p < k; ++p)
      acc += w[r * k + p] * x[p];
    y.set(r, acc);
  }
  return {y};
}

// o = softmax(q k^T * scale) v per (batch, head); q, k, v and o are (B, H, S, D); scale is
// params.scale when given, else 1/sqrt(D) (torch's default). No mask.
tensors sdpa(const task_def& t, const task_shape& s, const tensors& in) {
  auto y = oracle_output(t, s, 0);
  const auto& qs = in[0].shape;
  if (qs.size() < 2 || in[1].shape != qs || in[2].shape != qs)
    throw std::invalid_argument("sdpa: q, k and v need the same (..., S, D) shape");
  const std::int64_t d = qs.back(), seq = qs[qs.size() - 2], heads = in[0].numel() / (seq * d);
  const double scale = t.params.value("scale", 1.0 / std::sqrt(static_cast<double>(d)));
  const auto q = in[0].to_doubles(), k = in[1].to_doubles(), v = in[2].to_doubles();
  std::vector<double> p(static_cast<std::size_t>(seq)), o(static_cast<std::size_t>(d));
  for (std::int64_t h = 0; h < heads; ++h) {
    const double *qh = q.data() + h * seq * d, *kh = k.data() + h * seq * d,
                 *vh = v.data() + h * seq * d;
    for (std::int64_t i = 0; i < seq; ++i) {
      double m = -INFINITY;
      for (std::int64_t j = 0; j < seq; ++j) {
        double dot = 0;
        for (std::int64_t c = 0; c < d; ++c)
          dot += qh[i * d + c] * kh[j * d + c];
        p[j] = dot * scale;
        m = std::max(m, p[j]);
      }
      double sum = 0;
      std::fill(o.begin(), o.end(), 0.0);
      for (std::int64_t j = 0; j < seq; ++j) {
        p[j] = std::exp(p[j] - m);
        sum += p[j];
        for (std::int64_t c = 0; c < d; ++c)
          o[c] += p[j] * vh[j * d + c];
      }
      for (std::int64_t c = 0; c < d; ++c)
        y.set(h * seq * d + i * d + c, o[c] / sum);
    }
  }
  return {y};
}

} // namespace

void register_matmul_oracles() {
  register_task_oracle("matmul", matmul);
  register_task_oracle("bmm", bmm);
  register_task_oracle("gemv", gemv);
  register_task_oracle("sdpa", sdpa);
}

} // namespace kg
