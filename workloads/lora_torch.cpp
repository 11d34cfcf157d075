#include "workloads/lora_torch.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include <torch/torch.h>

namespace kg {
namespace {

torch::Dtype parse_dtype(const std::string& s) {
  if (s == "float64") return torch::kFloat64;
  if (s == "float32") return torch::kFloat32;
  if (s == "bfloat16") return torch::kBFloat16;
  throw std::runtime_error("lora_trainer: unknown dtype '" + s + "' (float64, float32, bfloat16)");
}

// A copy of `v` shaped `shape`, on the device in the dtype (through float64 on the host).
torch::Tensor to_tensor(const std::vector<double>& v, std::vector<std::int64_t> shape,
                        const torch::TensorOptions& o) {
  auto t = torch::from_blob(const_cast<double*>(v.data()), shape, torch::kFloat64).clone();
  return t.to(o.device(), o.dtype().toScalarType());
}

std::vector<double> to_doubles(const torch::Tensor& t) {
  const auto c = t.detach().to(torch::kCPU, torch::kFloat64).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

torch::Tensor rmsnorm(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  return x * torch::rsqrt(x.pow(2).mean(-1, true) + eps) * w;
}

} // namespace

struct lora_trainer::impl {
  lora_config c;
  torch::TensorOptions o;
  struct layer {
    torch::Tensor w_in, wq, wk, wv, wo, q_norm, k_norm, w_post, wg, wu, wd;
  };
  torch::Tensor embed, w_final, lm_head, cos, sin, causal;
  std::vector<layer> layers;
  struct adapter_layer {
    torch::Tensor aq, bq, av, bv;
  };
  std::vector<std::vector<adapter_layer>> jobs;

  // Rotate-half RoPE on [T, heads, D] with the precomputed cos / sin of [T, 1, D/2].
  torch::Tensor rope(const torch::Tensor& x) const {
    const auto d2 = x.size(-1) / 2;
    const auto x1 = x.narrow(-1, 0, d2), x2 = x.narrow(-1, d2, d2);
    return torch::cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, -1);
  }

  torch::Tensor loss(const std::vector<adapter_layer>& a, const lora_batch& b) const {
    const auto& m = c.model;
    const std::int64_t T = c.seq, D = m.head_dim, QH = m.q_heads, KH = m.kv_heads;
    const double s = c.scaling();
    auto tokens = torch::tensor(b.tokens, torch::kInt64).to(o.device());
    auto x = embed.index_select(0, tokens);
    for (std::size_t l = 0; l < layers.size(); ++l) {
      const auto& L = layers[l];
      const auto& A = a[l];
      auto h = rmsnorm(x, L.w_in, m.rms_eps);
      auto q = h.matmul(L.wq.t()) + s * h.matmul(A.aq.t()).matmul(A.bq.t());
      auto k = h.matmul(L.wk.t());
      auto v = h.matmul(L.wv.t()) + s * h.matmul(A.av.t()).matmul(A.bv.t());
      q = rope(rmsnorm(q.view({T, QH, D}), L.q_norm, m.rms_eps)).transpose(0, 1); // [QH, T, D]
      k = rope(rmsnorm(k.view({T, KH, D}), L.k_norm, m.rms_eps)).transpose(0, 1);
      auto vv = v.view({T, KH, D}).transpose(0, 1);
      k = k.repeat_interleave(QH / KH, 0);
      vv = vv.repeat_interleave(QH / KH, 0);
      auto scores = q.matmul(k.transpose(1, 2)) / std::sqrt(static_cast<double>(D));
      scores = scores.masked_fill(causal, -std::numeric_limits<double>::infinity());
      // Softmax in float32 at least (bf16 scores would round the probabilities).
      const auto probs = scores.scalar_type() == torch::kBFloat16
                             ? torch::softmax(scores.to(torch::kFloat32), -1).to(vv.scalar_type())
                             : torch::softmax(scores, -1);
      auto att = probs.matmul(vv); // [QH, T, D]
      x = x + att.transpose(0, 1).reshape({T, QH * D}).matmul(L.wo.t());
      h = rmsnorm(x, L.w_post, m.rms_eps);
      x = x + (torch::silu(h.matmul(L.wg.t())) * h.matmul(L.wu.t())).matmul(L.wd.t());
    }
    auto logits = rmsnorm(x, w_final, m.rms_eps).matmul(lm_head.t());
    if (logits.scalar_type() != torch::kFloat64) logits = logits.to(torch::kFloat32);
    auto targets = torch::tensor(b.targets, torch::kInt64).to(o.device());
    return torch::nn::functional::cross_entropy(logits, targets);
  }
};

lora_trainer::lora_trainer(const lora_config& c, const lora_base& base,
                           const std::vector<lora_adapters>& jobs, const lora_torch_options& opt)
    : p_(std::make_unique<impl>()) {
  auto& P = *p_;
  P.c = c;
  P.o = torch::TensorOptions().device(torch::Device(opt.device)).dtype(parse_dtype(opt.dtype));
  const auto& m = c.model;
  const std::int64_t H = m.hidden, qd = m.q_heads * m.head_dim, kd = m.kv_heads * m.head_dim;
  const std::int64_t I = m.intermediate, V = m.vocab, D = m.head_dim;
  P.embed = to_tensor(base.embed, {V, H}, P.o);
  for (const auto& L : base.layers)
    P.layers.push_back({to_tensor(L.w_in, {H}, P.o), to_tensor(L.wq, {qd, H}, P.o),
                        to_tensor(L.wk, {kd, H}, P.o), to_tensor(L.wv, {kd, H}, P.o),
                        to_tensor(L.wo, {H, qd}, P.o), to_tensor(L.q_norm, {D}, P.o),
                        to_tensor(L.k_norm, {D}, P.o), to_tensor(L.w_post, {H}, P.o),
                        to_tensor(L.wg, {I, H}, P.o), to_tensor(L.wu, {I, H}, P.o),
                        to_tensor(L.wd, {H, I}, P.o)});
  P.w_final = to_tensor(base.w_final, {H}, P.o);
  P.lm_head = to_tensor(base.lm_head, {V, H}, P.o);
  // RoPE tables in float64, then the working dtype: angle(t, i) = t * theta^(-2i / D).
  std::vector<double> cs, sn;
  for (std::int64_t t = 0; t < c.seq; ++t)
    for (std::int64_t i = 0; i < D / 2; ++i) {
      const double a =
          static_cast<double>(t) *
          std::pow(m.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(D));
      cs.push_back(std::cos(a));
      sn.push_back(std::sin(a));
    }
  P.cos = to_tensor(cs, {c.seq, 1, D / 2}, P.o);
  P.sin = to_tensor(sn, {c.seq, 1, D / 2}, P.o);
  P.causal = torch::ones({c.seq, c.seq}, torch::TensorOptions().dtype(torch::kBool))
                 .triu(1)
                 .to(P.o.device());
  for (const auto& j : jobs) {
    std::vector<impl::adapter_layer> layers;
    for (const auto& L : j.layers) {
      auto leaf = [&](const std::vector<double>& v, std::vector<std::int64_t> shape) {
        return to_tensor(v, std::move(shape), P.o).set_requires_grad(true);
      };
      layers.push_back({leaf(L.aq, {c.rank, H}), leaf(L.bq, {qd, c.rank}), leaf(L.av, {c.rank, H}),
                        leaf(L.bv, {kd, c.rank})});
    }
    P.jobs.push_back(std::move(layers));
  }
}

lora_trainer::~lora_trainer() = default;

std::vector<lora_job_step> lora_trainer::step(const std::vector<lora_batch>& batches, double lr) {
  if (batches.size() != p_->jobs.size())
    throw std::invalid_argument("lora_trainer::step: one batch per job");
  std::vector<lora_job_step> out;
  for (std::size_t j = 0; j < batches.size(); ++j) {
    auto& a = p_->jobs[j];
    const auto loss = p_->loss(a, batches[j]);
    loss.backward();
    lora_job_step r;
    r.loss = loss.item<double>();
    torch::NoGradGuard no_grad;
    for (auto& L : a)
      for (auto* t : {&L.aq, &L.bq, &L.av, &L.bv}) {
        const auto g = to_doubles(t->grad());
        r.grad.insert(r.grad.end(), g.begin(), g.end());
        if (lr != 0) t->sub_(t->grad() * lr);
        t->mutable_grad().zero_();
      }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<lora_adapters> lora_trainer::adapters() const {
  std::vector<lora_adapters> out;
  for (const auto& j : p_->jobs) {
    lora_adapters a;
    for (const auto& L : j)
      a.layers.push_back({to_doubles(L.aq), to_doubles(L.bq), to_doubles(L.av), to_doubles(L.bv)});
    out.push_back(std::move(a));
  }
  return out;
}

} // namespace kg
