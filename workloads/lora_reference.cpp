#include "workloads/lora_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kg {
namespace {

using mat = std::vector<double>; // row-major

// y[t][o] = sum_i x[t][i] w[o][i]
mat linear(const mat& x, const mat& w, std::int64_t rows, std::int64_t in, std::int64_t out) {
  mat y(static_cast<std::size_t>(rows * out), 0.0);
  for (std::int64_t t = 0; t < rows; ++t)
    for (std::int64_t o = 0; o < out; ++o) {
      double s = 0;
      for (std::int64_t i = 0; i < in; ++i)
        s += x[static_cast<std::size_t>(t * in + i)] * w[static_cast<std::size_t>(o * in + i)];
      y[static_cast<std::size_t>(t * out + o)] = s;
    }
  return y;
}

// RMS-normalizes each group of `width` values in place, then multiplies by w.
void rmsnorm(mat& x, const mat& w, std::int64_t width, double eps) {
  for (std::size_t g = 0; g < x.size(); g += static_cast<std::size_t>(width)) {
    double ss = 0;
    for (std::int64_t i = 0; i < width; ++i)
      ss += x[g + static_cast<std::size_t>(i)] * x[g + static_cast<std::size_t>(i)];
    const double r = 1.0 / std::sqrt(ss / static_cast<double>(width) + eps);
    for (std::int64_t i = 0; i < width; ++i)
      x[g + static_cast<std::size_t>(i)] *= r * w[static_cast<std::size_t>(i)];
  }
}

// Rotate-half RoPE on [seq][heads][d]: pairs (i, i + d/2), angle pos * theta^(-2i/d).
void rope(mat& x, std::int64_t seq, std::int64_t heads, std::int64_t d, double theta) {
  for (std::int64_t t = 0; t < seq; ++t)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < d / 2; ++i) {
        const double a = static_cast<double>(t) *
                         std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
        const std::size_t p = static_cast<std::size_t>((t * heads + h) * d + i);
        const double x1 = x[p], x2 = x[p + static_cast<std::size_t>(d / 2)];
        x[p] = x1 * std::cos(a) - x2 * std::sin(a);
        x[p + static_cast<std::size_t>(d / 2)] = x2 * std::cos(a) + x1 * std::sin(a);
      }
}

// q + s * (x A^T) B^T for an adapter pair.
void add_adapter(mat& y, const mat& x, const mat& a, const mat& b, std::int64_t rows,
                 std::int64_t in, std::int64_t rank, std::int64_t out, double s) {
  const mat xa = linear(x, a, rows, in, rank);
  const mat d = linear(xa, b, rows, rank, out);
  for (std::size_t k = 0; k < y.size(); ++k)
    y[k] += s * d[k];
}

} // namespace

double lora_reference_loss(const lora_config& c, const lora_base& base, const lora_adapters& a,
                           const lora_batch& batch) {
  const auto& m = c.model;
  const std::int64_t T = c.seq, H = m.hidden, D = m.head_dim, QH = m.q_heads, KH = m.kv_heads;
  const std::int64_t qd = QH * D, kd = KH * D, I = m.intermediate, V = m.vocab;
  mat x(static_cast<std::size_t>(T * H));
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t i = 0; i < H; ++i)
      x[static_cast<std::size_t>(t * H + i)] =
          base.embed[static_cast<std::size_t>(batch.tokens[static_cast<std::size_t>(t)] * H + i)];
  for (std::int64_t l = 0; l < m.layers; ++l) {
    const auto& L = base.layers[static_cast<std::size_t>(l)];
    const auto& A = a.layers[static_cast<std::size_t>(l)];
    mat h = x;
    rmsnorm(h, L.w_in, H, m.rms_eps);
    mat q = linear(h, L.wq, T, H, qd), k = linear(h, L.wk, T, H, kd), v = linear(h, L.wv, T, H, kd);
    add_adapter(q, h, A.aq, A.bq, T, H, c.rank, qd, c.scaling());
    add_adapter(v, h, A.av, A.bv, T, H, c.rank, kd, c.scaling());
    rmsnorm(q, L.q_norm, D, m.rms_eps);
    rmsnorm(k, L.k_norm, D, m.rms_eps);
    rope(q, T, QH, D, m.rope_theta);
    rope(k, T, KH, D, m.rope_theta);
    mat att(static_cast<std::size_t>(T * qd), 0.0);
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    std::vector<double> p(static_cast<std::size_t>(T));
    for (std::int64_t hq = 0; hq < QH; ++hq) {
      const std::int64_t hk = hq / (QH / KH);
      for (std::int64_t t = 0; t < T; ++t) {
        double mx = -1e300;
        for (std::int64_t u = 0; u <= t; ++u) { // causal
          double s = 0;
          for (std::int64_t i = 0; i < D; ++i)
            s += q[static_cast<std::size_t>((t * QH + hq) * D + i)] *
                 k[static_cast<std::size_t>((u * KH + hk) * D + i)];
          p[static_cast<std::size_t>(u)] = s * scale;
          mx = std::max(mx, p[static_cast<std::size_t>(u)]);
        }
        double sum = 0;
        for (std::int64_t u = 0; u <= t; ++u)
          sum += (p[static_cast<std::size_t>(u)] = std::exp(p[static_cast<std::size_t>(u)] - mx));
        for (std::int64_t u = 0; u <= t; ++u)
          for (std::int64_t i = 0; i < D; ++i)
            att[static_cast<std::size_t>((t * QH + hq) * D + i)] +=
                p[static_cast<std::size_t>(u)] / sum *
                v[static_cast<std::size_t>((u * KH + hk) * D + i)];
      }
    }
    const mat o = linear(att, L.wo, T, qd, H);
    for (std::size_t k2 = 0; k2 < x.size(); ++k2)
      x[k2] += o[k2];
    h = x;
    rmsnorm(h, L.w_post, H, m.rms_eps);
    const mat g = linear(h, L.wg, T, H, I), up = linear(h, L.wu, T, H, I);
    mat act(g.size());
    for (std::size_t k2 = 0; k2 < g.size(); ++k2)
      act[k2] = g[k2] / (1.0 + std::exp(-g[k2])) * up[k2];
    const mat d = linear(act, L.wd, T, I, H);
    for (std::size_t k2 = 0; k2 < x.size(); ++k2)
      x[k2] += d[k2];
  }
  rmsnorm(x, base.w_final, H, m.rms_eps);
  const mat logits = linear(x, base.lm_head, T, H, V);
  double loss = 0;
  for (std::int64_t t = 0; t < T; ++t) {
    const double* row = logits.data() + t * V;
    const double mx = *std::max_element(row, row + V);
    double sum = 0;
    for (std::int64_t j = 0; j < V; ++j)
      sum += std::exp(row[j] - mx);
    loss += std::log(sum) + mx - row[batch.targets[static_cast<std::size_t>(t)]];
  }
  return loss / static_cast<double>(T);
}

double worst_relative_difference(const std::vector<double>& a, const std::vector<double>& b,
                                 double atol) {
  double w = 0;
  for (std::size_t k = 0; k < a.size() && k < b.size(); ++k)
    w = std::max(w, std::fabs(a[k] - b[k]) / (atol + std::fabs(b[k])));
  return a.size() == b.size() ? w : std::numeric_limits<double>::infinity();
}

std::vector<double> lora_reference_grad(const lora_config& c, const lora_base& base,
                                        const lora_adapters& a, const lora_batch& batch, double h) {
  auto p = a.flat();
  std::vector<double> g(p.size());
  lora_adapters work = a;
  for (std::size_t k = 0; k < p.size(); ++k) {
    const double v = p[k], step = h * std::max(1.0, std::fabs(v));
    p[k] = v + step;
    work.set_flat(p);
    const double up = lora_reference_loss(c, base, work, batch);
    p[k] = v - step;
    work.set_flat(p);
    const double down = lora_reference_loss(c, base, work, batch);
    p[k] = v;
    g[k] = (up - down) / (2 * step);
  }
  return g;
}

} // namespace kg
