// fp64 oracles: fused ops (a GEMM with its epilogue, gated activations, masked softmax, add +
// norm, per-head norm, RoPE, cross-entropy, attention decode). Each computes the exact math of
// the fused op in double; where the fused op itself stores an intermediate (an output of the
// task), the oracle rounds it to that output's dtype before the next step reads it.
//
// Tolerances of the tasks (data/tasks/<id>.json), one line per choice. "Margin" is the largest
// |out - oracle| / (atol + rtol |oracle|) seen over the sandbox's draws (seed 20261129) on an H200:
// the task kernels in kernels/tasks stay under 0.25 everywhere.
// - gemm_bias_{relu,gelu,silu}: bf16 atol 6e-3, rtol 1.6e-2: one bf16 rounding is <= 2^-8
//   relative; LibTorch's bf16 F.linear errs up to ~5e-3 near zero (margin 0.79 at 6e-3, fails at
//   3e-3); float16 accumulation (margin >= 1.9, hundreds of elements) and a missing bias fail.
// - fused_linear_residual: bf16 atol 2e-2, rtol 1.6e-2: the unfused reference rounds
//   x @ w^T + bias (|.| < 4, half ulp <= 2^-7) to bf16 before the residual can cancel it (margin
//   0.77); float16 accumulation still fails (margin 1.6).
// - fused_silu_gate_mul: bf16 atol 1e-3, rtol 1.6e-2: a product, so every rounding (silu stored
//   in bf16, the product) is relative; atol only covers values within 1e-3 of zero.
// - fused_masked_scaled_softmax: fp32 atol 1e-7, rtol 1e-5: float32 exp and sum err ~1e-6
//   relative; probabilities are ~1/S (>= 1e-3), so float16 math (5e-4 relative) fails.
// - fused_add_layernorm: fp32 atol 1e-5, rtol 1e-5: float32 mean and variance of N(0,2) rows err
//   ~1e-6; float16 math fails.
// - fused_bias_dropout_free_residual: bf16 atol 1e-2, rtol 1.6e-2: as linear_residual, the
//   unfused reference rounds x + bias (|.| mostly < 4) to bf16 before the residual may cancel it.
// - fused_rmsnorm_qk_per_head: bf16 atol 1e-3, rtol 1.6e-2: the reference rounds the normalized
//   value and the weighted value (two relative roundings, <= 2^-7 together).
// - fused_rope_qk: bf16 atol 2e-2, rtol 1.6e-2: an output element is a difference of two products
//   (|q| < ~5); the reference's bf16 cos/sin and bf16 products leave up to 1.5e-2 after a
//   cancellation (margin 0.70); a float32 angle at pos < 8192 errs ~1e-3 rad; a wrong theta,
//   layout or position fails by orders of magnitude.
// - fused_softmax_cross_entropy: fp32 atol 2e-5, rtol 2e-6: loss ~12; a float32 sum of 1.5e5
//   exps errs ~1e-6 relative (1e-6 in the log); float16 math fails (margin ~100).
// - fused_scale_bias_tanh: fp32 atol 1e-6, rtol 1e-5: tanhf is within 2 ulp; float16 math or the
//   tanh.approx instruction (2^-11 relative) fails.
// - fused_attention_decode_step: bf16 atol 5e-4, rtol 1.6e-2: |o| ~ 0.05 (a softmax-weighted
//   mean of N(0,1) values); LibTorch's SDPA (margin 0.70) and bf16 probabilities in the PV product
//   as FlashAttention rounds them (0.58) pass; writing zeros or dropping one key fails.
#include "oracles/task_ops_common.h"
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "oracles/task_oracles.h"

namespace kg {
namespace {

using task_ops::rows_cols;
using task_ops::silu;

// sum_k a[k] * b[k] with four independent partial sums: the same value to ~1e-16, and several
// times faster than one chain of dependent additions (an oracle call must stay well under 1 s).
double dot4(const double* a, const double* b, std::int64_t n) {
  double s[4] = {0, 0, 0, 0};
  std::int64_t k = 0;
  for (; k + 4 <= n; k += 4)
    for (int j = 0; j < 4; ++j)
      s[j] += a[k + j] * b[k + j];
  for (; k < n; ++k)
    s[0] += a[k] * b[k];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

// y[m, n] = sum_k x[m, k] * w[n, k] + bias[n], in double (x: [M, K], w: [N, K]).
std::vector<double> linear(const host_tensor& x, const host_tensor& w, const host_tensor& bias) {
  const std::int64_t K = x.shape.back(), M = x.numel() / K, N = w.shape.front();
  if (w.shape.back() != K || bias.numel() != N)
    throw std::invalid_argument("linear: x, w and bias disagree on K or N");
  const std::vector<double> xd = x.to_doubles(), wd = w.to_doubles();
  std::vector<double> y(static_cast<std::size_t>(M * N));
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < N; ++n)
      y[static_cast<std::size_t>(m * N + n)] =
          dot4(xd.data() + m * K, wd.data() + n * K, K) + bias.at(n);
  return y;
}

double gelu_erf(double z) {
  return 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0)));
}

template <double (*act)(double)>
std::vector<host_tensor> gemm_bias_act(const task_def& t, const task_shape& s,
                                       const std::vector<host_tensor>& in) {
  auto y = oracle_output(t, s, 0);
  const auto z = linear(in[0], in[1], in[2]);
  for (std::int64_t i = 0; i < y.numel(); ++i)
    y.set(i, act(z[static_cast<std::size_t>(i)]));
  return {y};
}

double relu(double z) {
  return std::max(z, 0.0);
}

std::vector<host_tensor> gemm_bias_gelu(const task_def& t, const task_shape& s,
                                        const std::vector<host_tensor>& in) {
  if (t.params.value("approximate", std::string("none")) != "none")
    throw std::invalid_argument("gemm_bias_gelu: only the exact (erf) GELU is defined");
  return gemm_bias_act<gelu_erf>(t, s, in);
}

std::vector<host_tensor> linear_residual(const task_def& t, const task_shape& s,
                                         const std::vector<host_tensor>& in) {
  auto y = oracle_output(t, s, 0);
  const auto z = linear(in[0], in[1], in[2]);
  for (std::int64_t i = 0; i < y.numel(); ++i)
    y.set(i, z[static_cast<std::size_t>(i)] + in[3].at(i));
  return {y};
}

std::vector<host_tensor> silu_gate_mul(const task_def& t, const task_shape& s,
                                       const std::vector<host_tensor>& in) {
  auto y = oracle_output(t, s, 0);
  for (std::int64_t i = 0; i < y.numel(); ++i)
    y.set(i, silu(in[0].at(i)) * in[1].at(i));
  return {y};
}

// x: [B, H, Q, S]; mask: [B, S] (0 masks the key out for every head and query of batch b).
std::vector<host_tensor> masked_scaled_softmax(const task_def& t, const task_shape& s,
                                               const std::vector<host_tensor>& in) {
  auto y = oracle_output(t, s, 0);
  const double scale = t.params.at("scale").get<double>();
  const auto& x = in[0];
  const std::int64_t S = x.shape[3], rows_per_batch = x.shape[1] * x.shape[2];
  const std::int64_t rows = x.numel() / S;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t b = r / rows_per_batch, base = r * S;
    double m = -INFINITY, sum = 0;
    for (std::int64_t c = 0; c < S; ++c)
      if (in[1].at(b * S + c) != 0) m = std::max(m, scale * x.at(base + c));
    if (m == -INFINITY) { // every key masked: defined as 0 (torch gives NaN, nan_to_num -> 0)
      for (std::int64_t c = 0; c < S; ++c)
        y.set(base + c, 0.0);
      continue;
    }
    for (std::int64_t c = 0; c < S; ++c)
      if (in[1].at(b * S + c) != 0) sum += std::exp(scale * x.at(base + c) - m);
    for (std::int64_t c = 0; c < S; ++c)
      y.set(base + c, in[1].at(b * S + c) != 0 ? std::exp(scale * x.at(base + c) - m) / sum : 0.0);
  }
  return {y};
}

// h = x + residual, stored in h's dtype (the next step reads the stored sum); y = layer_norm(h)
// with the population variance, times weight plus bias.
std::vector<host_tensor> add_layernorm(const task_def& t, const task_shape& s,
                                       const std::vector<host_tensor>& in) {
  auto h = oracle_output(t, s, 0);
  auto y = oracle_output(t, s, 1);
  const double eps = t.params.value("eps", 1e-5);
  const std::int64_t C = in[0].shape.back(), rows = in[0].numel() / C;
  host_tensor stored(t.outputs[0].type, h.shape);
  for (std::int64_t i = 0; i < h.numel(); ++i) {
    h.set(i, in[0].at(i) + in[1].at(i));
    stored.set(i, in[0].at(i) + in[1].at(i));
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (std::int64_t c = 0; c < C; ++c)
      mean += stored.at(r * C + c);
    mean /= static_cast<double>(C);
    for (std::int64_t c = 0; c < C; ++c)
      var += (stored.at(r * C + c) - mean) * (stored.at(r * C + c) - mean);
    const double inv = 1.0 / std::sqrt(var / static_cast<double>(C) + eps);
    for (std::int64_t c = 0; c < C; ++c)
      y.set(r * C + c, (stored.at(r * C + c) - mean) * inv * in[2].at(c) + in[3].at(c));
  }
  return {h, y};
}

// y = x + bias (broadcast over the last dimension) + residual.
std::vector<host_tensor> bias_residual(const task_def& t, const task_shape& s,
                                       const std::vector<host_tensor>& in) {
  auto y = oracle_output(t, s, 0);
  const std::int64_t C = in[1].numel();
  for (std::int64_t i = 0; i < y.numel(); ++i)
    y.set(i, in[0].at(i) + in[1].at(i % C) + in[2].at(i));
  return {y};
}

// Each head vector of x (the last dimension, D) divided by its root mean square, times w.
void rmsnorm_heads(const host_tensor& x, const host_tensor& w, double eps, host_tensor& y) {
  const std::int64_t D = x.shape.back(), heads = x.numel() / D;
  for (std::int64_t h = 0; h < heads; ++h) {
    double ss = 0;
    for (std::int64_t d = 0; d < D; ++d)
      ss += x.at(h * D + d) * x.at(h * D + d);
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(D) + eps);
    for (std::int64_t d = 0; d < D; ++d)
      y.set(h * D + d, x.at(h * D + d) * inv * w.at(d));
  }
}

std::vector<host_tensor> rmsnorm_qk_per_head(const task_def& t, const task_shape& s,
                                             const std::vector<host_tensor>& in) {
  auto q = oracle_output(t, s, 0);
  auto k = oracle_output(t, s, 1);
  const double eps = t.params.value("eps", 1e-6);
  rmsnorm_heads(in[0], in[2], eps, q);
  rmsnorm_heads(in[1], in[3], eps, k);
  return {q, k};
}

// Rotate-half RoPE of x: [T, H, D] at positions pos[T]: for i < D/2, with
// a = pos * theta^(-2i/D): y[i] = x[i] cos a - x[i + D/2] sin a and
// y[i + D/2] = x[i + D/2] cos a + x[i] sin a.
void rope_rows(const host_tensor& x, const host_tensor& pos, double theta, host_tensor& y) {
  const std::int64_t D = x.shape[2], H = x.shape[1], T = x.shape[0], half = D / 2;
  for (std::int64_t tok = 0; tok < T; ++tok)
    for (std::int64_t i = 0; i < half; ++i) {
      const double a =
          pos.at(tok) * std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(D));
      const double c = std::cos(a), sn = std::sin(a);
      for (std::int64_t h = 0; h < H; ++h) {
        const std::int64_t base = (tok * H + h) * D;
        const double x1 = x.at(base + i), x2 = x.at(base + i + half);
        y.set(base + i, x1 * c - x2 * sn);
        y.set(base + i + half, x2 * c + x1 * sn);
      }
    }
}

std::vector<host_tensor> rope_qk(const task_def& t, const task_shape& s,
                                 const std::vector<host_tensor>& in) {
  auto q = oracle_output(t, s, 0);
  auto k = oracle_output(t, s, 1);
  const double theta = t.params.at("theta").get<double>();
  rope_rows(in[0], in[2], theta, q);
  rope_rows(in[1], in[2], theta, k);
  return {q, k};
}

// loss[r] = logsumexp(logits[r, :]) - logits[r, targets[r]].
std::vector<host_tensor> softmax_cross_entropy(const task_def& t, const task_shape& s,
                                               const std::vector<host_tensor>& in) {
  auto loss = oracle_output(t, s, 0);
  const std::int64_t V = in[0].shape.back(), rows = in[0].numel() / V;
  for (std::int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY, sum = 0;
    for (std::int64_t c = 0; c < V; ++c)
      m = std::max(m, in[0].at(r * V + c));
    for (std::int64_t c = 0; c < V; ++c)
      sum += std::exp(in[0].at(r * V + c) - m);
    const auto target = static_cast<std::int64_t>(in[1].at(r));
    if (target < 0 || target >= V)
      throw std::invalid_argument("softmax_cross_entropy: target out of range");
    loss.set(r, m + std::log(sum) - in[0].at(r * V + target));
  }
  return {loss};
}

std::vector<host_tensor> scale_bias_tanh(const task_def& t, const task_shape& s,
                                         const std::vector<host_tensor>& in) {
  auto y = oracle_output(t, s, 0);
  const double scale = t.params.at("scale").get<double>();
  const std::int64_t C = in[1].numel();
  for (std::int64_t i = 0; i < y.numel(); ++i)
    y.set(i, std::tanh(scale * in[0].at(i) + in[1].at(i % C)));
  return {y};
}

// q: [B, HQ, D]; k, v: [B, HK, S, D]; query head h reads kv head h / (HQ / HK).
// o[b, h] = sum_s softmax_s(scale * q . k[s]) v[s].
std::vector<host_tensor> attention_decode_step(const task_def& t, const task_shape& s,
                                               const std::vector<host_tensor>& in) {
  auto o = oracle_output(t, s, 0);
  const double scale = t.params.at("scale").get<double>();
  const std::int64_t B = in[0].shape[0], HQ = in[0].shape[1], D = in[0].shape[2];
  const std::int64_t HK = in[1].shape[1], S = in[1].shape[2];
  if (HK <= 0 || HQ % HK != 0)
    throw std::invalid_argument("attention_decode_step: HQ must be a multiple of HK");
  const std::int64_t group = HQ / HK;
  const std::vector<double> q = in[0].to_doubles(), k = in[1].to_doubles(), v = in[2].to_doubles();
  std::vector<double> p(static_cast<std::size_t>(S)), acc(static_cast<std::size_t>(D));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < HQ; ++h) {
      const std::int64_t qb = (b * HQ + h) * D, kvb = (b * HK + h / group) * S * D;
      double m = -INFINITY, sum = 0;
      for (std::int64_t j = 0; j < S; ++j) {
        const double dot = dot4(q.data() + qb, k.data() + kvb + j * D, D);
        p[static_cast<std::size_t>(j)] = scale * dot;
        m = std::max(m, scale * dot);
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      for (std::int64_t j = 0; j < S; ++j) {
        const double e = std::exp(p[static_cast<std::size_t>(j)] - m);
        sum += e;
        for (std::int64_t d = 0; d < D; ++d)
          acc[static_cast<std::size_t>(d)] += e * v[static_cast<std::size_t>(kvb + j * D + d)];
      }
      for (std::int64_t d = 0; d < D; ++d)
        o.set(qb + d, acc[static_cast<std::size_t>(d)] / sum);
    }
  return {o};
}

} // namespace

void register_fused_oracles() {
  register_task_oracle("gemm_bias_relu", gemm_bias_act<relu>);
  register_task_oracle("gemm_bias_gelu", gemm_bias_gelu);
  register_task_oracle("gemm_bias_silu", gemm_bias_act<silu>);
  register_task_oracle("linear_residual", linear_residual);
  register_task_oracle("silu_gate_mul", silu_gate_mul);
  register_task_oracle("masked_scaled_softmax", masked_scaled_softmax);
  register_task_oracle("add_layernorm", add_layernorm);
  register_task_oracle("bias_residual", bias_residual);
  register_task_oracle("rmsnorm_qk_per_head", rmsnorm_qk_per_head);
  register_task_oracle("rope_qk", rope_qk);
  register_task_oracle("softmax_cross_entropy", softmax_cross_entropy);
  register_task_oracle("scale_bias_tanh", scale_bias_tanh);
  register_task_oracle("attention_decode_step", attention_decode_step);
}

} // namespace kg
