#include "workloads/lora_torch.h"

#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>

#include <torch/torch.h>
#include <torch/version.h>
#if KG_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

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

namespace {

// Where the base weights come from: (name, shape, host values or nullptr, scale, mean) -> tensor.
using weight_source = std::function<torch::Tensor(const std::vector<double>*,
                                                  std::vector<std::int64_t>, double, double)>;

} // namespace

static void lora_trainer_init(lora_trainer::impl& P, const lora_config& c, const lora_base* base,
                              const weight_source& weight, const std::vector<lora_adapters>& jobs) {
  P.c = c;
  const auto& m = c.model;
  const std::int64_t H = m.hidden, qd = m.q_heads * m.head_dim, kd = m.kv_heads * m.head_dim;
  const std::int64_t I = m.intermediate, V = m.vocab, D = m.head_dim;
  const double s = c.init_scale;
  auto lin = [&](const std::vector<double>* host, std::int64_t out, std::int64_t in) {
    return weight(host, {out, in}, s / std::sqrt(static_cast<double>(in)), 0.0);
  };
  auto norm = [&](const std::vector<double>* host, std::int64_t n) {
    return weight(host, {n}, 0.1, 1.0); // near 1, never exactly (lora_model.cpp)
  };
  P.embed = weight(base ? &base->embed : nullptr, {V, H}, 1.0, 0.0);
  for (std::int64_t l = 0; l < m.layers; ++l) {
    const lora_layer_base* L = base ? &base->layers[static_cast<std::size_t>(l)] : nullptr;
    auto h = [&](const std::vector<double> lora_layer_base::*f) { return L ? &(L->*f) : nullptr; };
    lora_trainer::impl::layer x;
    x.w_in = norm(h(&lora_layer_base::w_in), H);
    x.wq = lin(h(&lora_layer_base::wq), qd, H);
    x.wk = lin(h(&lora_layer_base::wk), kd, H);
    x.wv = lin(h(&lora_layer_base::wv), kd, H);
    x.wo = lin(h(&lora_layer_base::wo), H, qd);
    x.q_norm = norm(h(&lora_layer_base::q_norm), D);
    x.k_norm = norm(h(&lora_layer_base::k_norm), D);
    x.w_post = norm(h(&lora_layer_base::w_post), H);
    x.wg = lin(h(&lora_layer_base::wg), I, H);
    x.wu = lin(h(&lora_layer_base::wu), I, H);
    x.wd = lin(h(&lora_layer_base::wd), H, I);
    P.layers.push_back(std::move(x));
  }
  P.w_final = norm(base ? &base->w_final : nullptr, H);
  P.lm_head = lin(base ? &base->lm_head : nullptr, V, H);
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
    std::vector<lora_trainer::impl::adapter_layer> layers;
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

lora_trainer::lora_trainer(const lora_config& c, const lora_base& base,
                           const std::vector<lora_adapters>& jobs, const lora_torch_options& opt)
    : p_(std::make_unique<impl>()) {
  p_->o = torch::TensorOptions().device(torch::Device(opt.device)).dtype(parse_dtype(opt.dtype));
  const auto o = p_->o;
  lora_trainer_init(
      *p_, c, &base,
      [&](const std::vector<double>* host, std::vector<std::int64_t> shape, double, double) {
        return to_tensor(*host, std::move(shape), o);
      },
      jobs);
}

lora_trainer::lora_trainer(const lora_config& c, std::uint64_t device_base_seed,
                           const std::vector<lora_adapters>& jobs, const lora_torch_options& opt)
    : p_(std::make_unique<impl>()) {
  p_->o = torch::TensorOptions().device(torch::Device(opt.device)).dtype(parse_dtype(opt.dtype));
  const auto o = p_->o;
  // Drawn in float32 on the device in a fixed order after one seeding, then cast: two trainers
  // with the same seed on one device and LibTorch version get the same float32 draws.
  torch::manual_seed(device_base_seed);
  const auto f32 = torch::TensorOptions().device(o.device()).dtype(torch::kFloat32);
  lora_trainer_init(
      *p_, c, nullptr,
      [&](const std::vector<double>*, std::vector<std::int64_t> shape, double scale, double mean) {
        return (torch::randn(shape, f32) * scale + mean).to(o.dtype().toScalarType());
      },
      jobs);
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

struct torch_matmul::impl {
  torch::Tensor a, b, c;
};

torch_matmul::torch_matmul(std::int64_t m, std::int64_t n, std::int64_t k, std::uint64_t seed)
    : p_(std::make_unique<impl>()) {
  if (const auto why = torch_external_stream_unavailable(); !why.empty())
    throw std::runtime_error(why);
  // Drawn on the host after one seeding (the same values on any device), then moved.
  torch::manual_seed(seed);
  const auto host = torch::TensorOptions().dtype(torch::kFloat32);
  p_->a = torch::randn({m, k}, host).to(torch::kCUDA, torch::kBFloat16);
  p_->b = torch::randn({k, n}, host).to(torch::kCUDA, torch::kBFloat16);
  p_->c = torch::empty({m, n}, p_->a.options());
}

torch_matmul::~torch_matmul() = default;

void torch_matmul::enqueue(CUstream_st* stream, int device) {
#if KG_TORCH_CUDA
  const c10::cuda::CUDAStreamGuard guard(
      c10::cuda::getStreamFromExternal(stream, static_cast<c10::DeviceIndex>(device)));
  torch::mm_out(p_->c, p_->a, p_->b);
#else
  (void)stream, (void)device;
  throw std::runtime_error(torch_external_stream_unavailable());
#endif
}

double torch_matmul::worst_relative_error(int samples) const {
  const auto a = p_->a.to(torch::kCPU, torch::kFloat64), b = p_->b.to(torch::kCPU, torch::kFloat64),
             c = p_->c.to(torch::kCPU, torch::kFloat64);
  const std::int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  const auto* pa = a.data_ptr<double>();
  const auto* pb = b.data_ptr<double>();
  const auto* pc = c.data_ptr<double>();
  double worst = 0;
  for (int s = 0; s < samples; ++s) {
    // Spread over rows and columns, corners included.
    const std::int64_t i = samples > 1 ? (m - 1) * s / (samples - 1) : 0;
    const std::int64_t j = samples > 1 ? (n - 1) * ((s * 7) % samples) / (samples - 1) : 0;
    double ref = 0, mag = 0;
    for (std::int64_t q = 0; q < k; ++q) {
      ref += pa[i * k + q] * pb[q * n + j];
      mag += std::fabs(pa[i * k + q] * pb[q * n + j]);
    }
    worst = std::max(worst, std::fabs(pc[i * n + j] - ref) / std::max(mag, 1e-30));
  }
  return worst;
}

void release_torch_cuda_cache() {
#if KG_TORCH_CUDA
  if (torch::cuda::is_available()) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
}

std::string torch_external_stream_unavailable() {
#if KG_TORCH_CUDA
  if (!torch::cuda::is_available()) return "LibTorch " TORCH_VERSION " sees no CUDA device";
  return "";
#else
  return "LibTorch " TORCH_VERSION " was built without CUDA (no c10_cuda): it cannot run on a "
         "CUDA stream of the caller's";
#endif
}

void run_on_torch_stream(CUstream_st* stream, int device, const std::function<void()>& fn) {
#if KG_TORCH_CUDA
  if (const auto why = torch_external_stream_unavailable(); !why.empty())
    throw std::runtime_error(why);
  {
    // As kernels/task_torch_refs.cpp times LibTorch on the timer's stream: the guard makes the
    // external stream current for this thread only, so another thread's LibTorch work (none in
    // the workloads today) would keep its own stream.
    const c10::cuda::CUDAStreamGuard guard(
        c10::cuda::getStreamFromExternal(stream, static_cast<c10::DeviceIndex>(device)));
    try {
      fn();
    } catch (...) {
      c10::cuda::CUDACachingAllocator::emptyCache();
      throw;
    }
  }
  c10::cuda::CUDACachingAllocator::emptyCache();
#else
  (void)stream, (void)device, (void)fn;
  throw std::runtime_error(torch_external_stream_unavailable());
#endif
}

} // namespace kg
