#include "workloads/lora_model.h"

#include <cmath>
#include <stdexcept>

#include "base/rng.h"

namespace kg {
namespace {

std::vector<double> normal(std::uint64_t seed, const std::string& name, std::size_t n, double scale,
                           double mean = 0.0) {
  rng r(seed, stream_id(name));
  std::vector<double> v(n);
  for (auto& x : v)
    x = mean + scale * r.normal();
  return v;
}

std::size_t sz(std::int64_t a, std::int64_t b = 1) {
  return static_cast<std::size_t>(a) * static_cast<std::size_t>(b);
}

} // namespace

std::size_t lora_adapters::size() const {
  std::size_t n = 0;
  for (const auto& l : layers)
    n += l.aq.size() + l.bq.size() + l.av.size() + l.bv.size();
  return n;
}

std::vector<double> lora_adapters::flat() const {
  std::vector<double> v;
  v.reserve(size());
  for (const auto& l : layers)
    for (const auto* p : {&l.aq, &l.bq, &l.av, &l.bv})
      v.insert(v.end(), p->begin(), p->end());
  return v;
}

void lora_adapters::set_flat(const std::vector<double>& v) {
  if (v.size() != size()) throw std::invalid_argument("lora_adapters::set_flat: wrong size");
  std::size_t at = 0;
  for (auto& l : layers)
    for (auto* p : {&l.aq, &l.bq, &l.av, &l.bv})
      for (auto& x : *p)
        x = v[at++];
}

lora_config lora_small_config() {
  lora_config c;
  c.model.hidden = 32;
  c.model.intermediate = 48;
  c.model.layers = 2;
  c.model.q_heads = 4;
  c.model.kv_heads = 2;
  c.model.head_dim = 8;
  c.model.vocab = 40;
  c.rank = 4;
  c.alpha = 8;
  c.seq = 12;
  return c;
}

lora_base make_lora_base(const lora_config& c, std::uint64_t seed) {
  const auto& m = c.model;
  const std::int64_t h = m.hidden, qd = m.q_heads * m.head_dim, kd = m.kv_heads * m.head_dim;
  const double s = c.init_scale;
  lora_base b;
  b.embed = normal(seed, "embed", sz(m.vocab, h), 1.0);
  for (std::int64_t l = 0; l < m.layers; ++l) {
    const std::string p = "layer" + std::to_string(l) + ".";
    lora_layer_base L;
    // Norm weights near 1, never exactly 1 (a kernel that ignored them would still differ).
    L.w_in = normal(seed, p + "w_in", sz(h), 0.1, 1.0);
    L.wq = normal(seed, p + "wq", sz(qd, h), s / std::sqrt(double(h)));
    L.wk = normal(seed, p + "wk", sz(kd, h), s / std::sqrt(double(h)));
    L.wv = normal(seed, p + "wv", sz(kd, h), s / std::sqrt(double(h)));
    L.wo = normal(seed, p + "wo", sz(h, qd), s / std::sqrt(double(qd)));
    L.q_norm = normal(seed, p + "q_norm", sz(m.head_dim), 0.1, 1.0);
    L.k_norm = normal(seed, p + "k_norm", sz(m.head_dim), 0.1, 1.0);
    L.w_post = normal(seed, p + "w_post", sz(h), 0.1, 1.0);
    L.wg = normal(seed, p + "wg", sz(m.intermediate, h), s / std::sqrt(double(h)));
    L.wu = normal(seed, p + "wu", sz(m.intermediate, h), s / std::sqrt(double(h)));
    L.wd = normal(seed, p + "wd", sz(h, m.intermediate), s / std::sqrt(double(m.intermediate)));
    b.layers.push_back(std::move(L));
  }
  b.w_final = normal(seed, "w_final", sz(h), 0.1, 1.0);
  b.lm_head = normal(seed, "lm_head", sz(m.vocab, h), s / std::sqrt(double(h)));
  return b;
}

lora_adapters make_lora_adapters(const lora_config& c, std::uint64_t seed, int job) {
  const auto& m = c.model;
  const std::int64_t h = m.hidden, qd = m.q_heads * m.head_dim, kd = m.kv_heads * m.head_dim;
  lora_adapters a;
  for (std::int64_t l = 0; l < m.layers; ++l) {
    const std::string p = "job" + std::to_string(job) + ".layer" + std::to_string(l) + ".";
    a.layers.push_back({normal(seed, p + "aq", sz(c.rank, h), 1.0 / std::sqrt(double(h))),
                        normal(seed, p + "bq", sz(qd, c.rank), 0.1 / std::sqrt(double(c.rank))),
                        normal(seed, p + "av", sz(c.rank, h), 1.0 / std::sqrt(double(h))),
                        normal(seed, p + "bv", sz(kd, c.rank), 0.1 / std::sqrt(double(c.rank)))});
  }
  return a;
}

lora_batch make_lora_batch(const lora_config& c, std::uint64_t seed, int job) {
  rng r(seed, stream_id("tokens.job" + std::to_string(job)));
  lora_batch b;
  for (std::int64_t t = 0; t <= c.seq; ++t)
    b.tokens.push_back(
        static_cast<std::int64_t>(r.below(static_cast<std::uint64_t>(c.model.vocab))));
  // Next-token targets: the sequence shifted by one.
  b.targets.assign(b.tokens.begin() + 1, b.tokens.end());
  b.tokens.pop_back();
  return b;
}

} // namespace kg
