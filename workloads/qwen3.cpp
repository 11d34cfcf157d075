#include "workloads/qwen3.h"

namespace kg {

std::vector<decode_gemm> decode_gemms(const qwen3_config& c) {
  const std::int64_t q = c.q_heads * c.head_dim, kv = c.kv_heads * c.head_dim;
  return {{"qkv", q + 2 * kv, c.hidden},
          {"o_proj", c.hidden, q},
          {"gate_up", 2 * c.intermediate, c.hidden},
          {"down", c.hidden, c.intermediate},
          {"lm_head", c.vocab, c.hidden}};
}

roofline gemm_roofline(const decode_gemm& g, std::int64_t batch, const qwen3_config& c) {
  const double e = static_cast<double>(c.bytes_per_element);
  const double n = static_cast<double>(g.n), k = static_cast<double>(g.k),
               b = static_cast<double>(batch);
  return {e * (n * k + b * k + b * n), 2.0 * b * n * k};
}

std::int64_t kv_bytes_per_token(const qwen3_config& c) {
  return c.layers * 2 * c.kv_heads * c.head_dim * c.bytes_per_element;
}

roofline attention_roofline(std::int64_t batch, std::int64_t context, const qwen3_config& c) {
  const double e = static_cast<double>(c.bytes_per_element);
  const double b = static_cast<double>(batch), s = static_cast<double>(context);
  const double d = static_cast<double>(c.head_dim), hq = static_cast<double>(c.q_heads),
               hk = static_cast<double>(c.kv_heads);
  // One layer: K and V (b x hk x s x d each), q and o (b x hq x d each).
  const double bytes = e * (2 * b * hk * s * d + 2 * b * hq * d);
  const double flops = 4.0 * b * hq * s * d; // q.k and p.v, a multiply-add each
  return {bytes, flops};
}

roofline decode_step_roofline(std::int64_t batch, std::int64_t context, const qwen3_config& c) {
  roofline r;
  for (const auto& g : decode_gemms(c)) {
    const auto one = gemm_roofline(g, batch, c);
    const double times = g.name == "lm_head" ? 1.0 : static_cast<double>(c.layers);
    r.bytes += times * one.bytes;
    r.flops += times * one.flops;
  }
  const auto att = attention_roofline(batch, context, c);
  r.bytes += static_cast<double>(c.layers) * att.bytes;
  r.flops += static_cast<double>(c.layers) * att.flops;
  return r;
}

} // namespace kg
