// The suites' kernel-level workloads: one decode kernel (or one LibTorch GEMM of the LoRA step)
// on its own, timed by kernelgate's harness (L2 flushed before every sample, SM clocks judged per
// sample), after its output was checked against an fp64 oracle computed here on the host from
// the same bf16 inputs. Inputs are drawn on the device from fixed seeds.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "gpu/cuda_check.h"
#include "gpu/device_buffer.h"
#include "kernels/decode/decode_kernels.h"
#include "kernels/decode/gemv_bf16.h"
#include "suite/suite_gpu_internal.h"
#include "workloads/lora_torch.h"
#include "workloads/qwen3.h"

namespace kg {
namespace {

struct bf16_buffer {
  device_buffer buf;
  std::size_t n = 0;
  __nv_bfloat16* get() const { return static_cast<__nv_bfloat16*>(buf.get()); }
};

bf16_buffer random_bf16(std::size_t n, std::uint64_t stream_id, float mean, float sd,
                        cudaStream_t s) {
  bf16_buffer b{device_buffer(n * sizeof(__nv_bfloat16)), n};
  KG_CUDA_CHECK(decode::launch_fill_uniform(b.get(), n, 20261201, stream_id, mean, sd, s));
  return b;
}

double bf16_value(std::uint16_t bits) {
  const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

std::vector<double> to_host(const bf16_buffer& b, cudaStream_t s) {
  const auto bits = copy_bf16_to_host(b.get(), b.n, s);
  std::vector<double> out(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i)
    out[i] = bf16_value(bits[i]);
  return out;
}

std::vector<int> ints_to_host(const device_buffer& b, std::size_t n, cudaStream_t s) {
  std::vector<int> out(n);
  KG_CUDA_CHECK(cudaMemcpyAsync(out.data(), b.get(), n * sizeof(int), cudaMemcpyDeviceToHost, s));
  KG_CUDA_CHECK(cudaStreamSynchronize(s));
  return out;
}

device_buffer ints_to_device(const std::vector<int>& v, cudaStream_t s) {
  device_buffer b(v.size() * sizeof(int));
  KG_CUDA_CHECK(
      cudaMemcpyAsync(b.get(), v.data(), v.size() * sizeof(int), cudaMemcpyHostToDevice, s));
  KG_CUDA_CHECK(cudaStreamSynchronize(s));
  return b;
}

// The worst error over the elements checked, as a fraction of each element's tolerance: the
// gate passes at <= 1.
struct oracle_check {
  double worst = 0;
  std::size_t checked = 0;
  std::string where;
  void add(double got, double ref, double tol, const std::string& at) {
    ++checked;
    const double e = std::isfinite(got) ? std::fabs(got - ref) / tol : INFINITY;
    if (e > worst || (checked == 1 && e >= worst)) {
      worst = e;
      std::ostringstream s;
      s << at << ": got " << got << ", fp64 " << ref << ", tolerance " << tol;
      where = s.str();
    }
  }
  workload_gate gate(const std::string& tolerance_rule) const {
    std::ostringstream d;
    d << checked << " elements checked (" << tolerance_rule << "); worst at " << where;
    return {"oracle_fp64", checked > 0 && worst <= 1.0, d.str()};
  }
};

// bf16 rounding of the output (2^-8 relative) plus float32 accumulation over `terms` magnitudes.
double output_tolerance(double ref, double magnitude) {
  return std::ldexp(std::fabs(ref), -8) + 1e-5 * magnitude + 1e-30;
}

double peak_flops_for(const std::string& gpu_name) {
  // Dense BF16 tensor-core peak from NVIDIA's datasheets (docs/suites.md cites them): the
  // FLOP ceiling of a compute-bound LoRA GEMM; a GPU not listed has no FLOP SOL.
  if (gpu_name.find("H200") != std::string::npos || gpu_name.find("H100") != std::string::npos)
    return 989.4e12;
  return 0;
}

std::string device_name() {
  cudaDeviceProp p{};
  int d = 0;
  KG_CUDA_CHECK(cudaGetDevice(&d));
  KG_CUDA_CHECK(cudaGetDeviceProperties(&p, d));
  return p.name;
}

// Times `work` with the session's kernel timer and fills samples, SOL and the timing record.
measured_workload timed(suite_gpu_session::impl& s, const suite_workload& w, const work_fn& work) {
  auto& timer = s.kernel_timer();
  const auto r = timer.measure(work);
  if (r.kept_us.empty())
    throw std::runtime_error("no sample kept (" + r.stop_reason + ", status " + r.status + ")");
  measured_workload m;
  for (const double us : r.kept_us)
    m.samples.push_back(us * 1e-6);
  m.extra["timing"] = {{"backend", r.backend},         {"kept", r.kept_us.size()},
                       {"discarded", r.discarded},     {"modal_sm_mhz", r.modal_mhz},
                       {"stop_reason", r.stop_reason}, {"l2_flushed", true}};
  if (w.sol) {
    if (w.sol->bound == "bytes") {
      const double gbps = s.copy_gbps();
      m.sol_bound = w.sol->quantity / (gbps * 1e9);
      m.sol_detail = {
          {"bytes", w.sol->quantity}, {"ceiling", "copy_bandwidth"}, {"ceiling_gbps", gbps}};
    } else if (const double peak = peak_flops_for(device_name()); peak > 0) {
      m.sol_bound = w.sol->quantity / peak;
      m.sol_detail = {
          {"flops", w.sol->quantity}, {"ceiling", "bf16_dense_peak"}, {"ceiling_flops", peak}};
    }
  }
  return m;
}

int param(const suite_workload& w, const char* key) {
  return w.params.at(key).get<int>();
}

// The fp64 oracle of a GEMV's output: 64 rows spread over N (first and last included), every
// batch row, against dot products of the same bf16 inputs.
oracle_check gemv_oracle(const bf16_buffer& x, const bf16_buffer& wt, const bf16_buffer& y,
                         int batch, int n, int k, cudaStream_t st) {
  const auto hx = to_host(x, st), hy = to_host(y, st);
  oracle_check oc;
  const int rows = std::min(n, 64);
  std::vector<std::uint16_t> wrow(static_cast<std::size_t>(k));
  for (int i = 0; i < rows; ++i) {
    const int r =
        rows > 1 ? static_cast<int>((static_cast<std::int64_t>(n) - 1) * i / (rows - 1)) : 0;
    KG_CUDA_CHECK(cudaMemcpy(wrow.data(), wt.get() + static_cast<std::size_t>(r) * k, k * 2,
                             cudaMemcpyDeviceToHost));
    for (int b = 0; b < batch; ++b) {
      double ref = 0, mag = 0;
      for (int q = 0; q < k; ++q) {
        const double t = hx[std::size_t(b) * k + q] * bf16_value(wrow[q]);
        ref += t;
        mag += std::fabs(t);
      }
      oc.add(hy[std::size_t(b) * n + r], ref, output_tolerance(ref, mag),
             "y[" + std::to_string(b) + ", " + std::to_string(r) + "]");
    }
  }
  return oc;
}

constexpr const char* gemv_tolerance_rule = "2^-8 |ref| + 1e-5 sum |x w|";

struct gemv_operands {
  bf16_buffer x, w, y;
};
gemv_operands gemv_inputs(int batch, int n, int k, cudaStream_t st) {
  return {random_bf16(std::size_t(batch) * k, 1, 0.0f, 1.0f, st),
          random_bf16(std::size_t(n) * k, 2, 0.0f, 0.02f, st),
          bf16_buffer{device_buffer(std::size_t(batch) * n * 2), std::size_t(batch) * n}};
}

const role_override* override_of(const suite_gpu_session::impl& s, const std::string& role) {
  for (const auto& o : s.settings.overrides)
    if (o.role == role) return &o;
  return nullptr;
}

measured_workload run_gemv(suite_gpu_session::impl& s, const suite_workload& w) {
  const int batch = param(w, "batch"), n = param(w, "n"), k = param(w, "k");
  cuda_stream st;
  const auto op = gemv_inputs(batch, n, k, st.get());
  nlohmann::json config;
  std::function<void(cudaStream_t)> launch;
  device_buffer packed, ws;
  if (const auto* ov = override_of(s, "gemv." + w.params.at("projection").get<std::string>())) {
    launch = [&, ov](cudaStream_t q) {
      KG_CUDA_CHECK(ov->launch(op.x.get(), op.w.get(), op.y.get(), batch, n, k, q));
    };
    config = {{"override", ov->source.string()}};
  } else {
    const auto cfg = pick_gemv_config(batch, n, k);
    const __nv_bfloat16* wp = op.w.get();
    if (gemv_reads_packed(cfg)) {
      const gemv_layout l = gemv_weight_layout(cfg);
      packed = device_buffer(gemv_packed_bytes(l, n, k));
      KG_CUDA_CHECK(pack_gemv_weights(l, op.w.get(), static_cast<__nv_bfloat16*>(packed.get()), n,
                                      k, st.get()));
      wp = static_cast<const __nv_bfloat16*>(packed.get());
    }
    ws = device_buffer(gemv_workspace_bytes(cfg, batch, n, k));
    if (ws.size()) KG_CUDA_CHECK(cudaMemsetAsync(ws.get(), 0, ws.size(), st.get()));
    launch = [&, cfg, wp](cudaStream_t q) {
      KG_CUDA_CHECK(launch_gemv_bf16(op.x.get(), wp, op.y.get(), batch, n, k, cfg, ws.get(), q));
    };
    config = {{"kind", gemv_kind_name(cfg.kind)},
              {"rows_per_warp", cfg.rows_per_warp},
              {"warps_per_block", cfg.warps_per_block},
              {"unroll", cfg.unroll},
              {"split_k", cfg.split_k},
              {"cluster", cfg.cluster}};
  }
  launch(st.get());
  const auto oc = gemv_oracle(op.x, op.w, op.y, batch, n, k, st.get());
  auto m = timed(s, w, launch);
  m.gates.push_back(oc.gate(gemv_tolerance_rule));
  m.extra["gemv_config"] = config;
  return m;
}

measured_workload run_attention(suite_gpu_session::impl& s, const suite_workload& w) {
  const int batch = param(w, "batch"), context = param(w, "context"), hq = param(w, "q_heads"),
            hk = param(w, "kv_heads"), d = param(w, "head_dim");
  cuda_stream st;
  const std::size_t cache = std::size_t(batch) * hk * context * d;
  const auto kc = random_bf16(cache, 3, 0.0f, 1.0f, st.get());
  const auto vc = random_bf16(cache, 4, 0.0f, 1.0f, st.get());
  const auto q = random_bf16(std::size_t(batch) * hq * d, 5, 0.0f, 1.0f, st.get());
  bf16_buffer out{device_buffer(q.n * 2), q.n};
  std::vector<int> slots(batch), lengths(batch, context);
  std::iota(slots.begin(), slots.end(), 0);
  const auto dslots = ints_to_device(slots, st.get()), dlen = ints_to_device(lengths, st.get());
  device_buffer ws(decode::attention_workspace_bytes(batch, hq, hk, d, context));
  // Merge counters, zeroed once as the engine's are: the attention runs in the form the engine's
  // configuration asks for (merged in stage 1 or by stage 2), not always the two-kernel one.
  device_buffer counters(std::size_t(batch) * hk * sizeof(unsigned));
  KG_CUDA_CHECK(cudaMemsetAsync(counters.get(), 0, counters.size(), st.get()));
  decode::attention_args a;
  a.q = q.get();
  a.q_row_stride = std::int64_t(hq) * d;
  a.k_cache = kc.get();
  a.v_cache = vc.get();
  a.slots = static_cast<const int*>(dslots.get());
  a.lengths = static_cast<const int*>(dlen.get());
  a.out = out.get();
  a.workspace = ws.get();
  a.rows = batch;
  a.q_heads = hq;
  a.kv_heads = hk;
  a.head_dim = d;
  a.max_context = context;
  a.counters = static_cast<unsigned*>(counters.get());
  auto launch = [&](cudaStream_t st2) { KG_CUDA_CHECK(decode::launch_attention(a, st2)); };
  launch(st.get());
  const auto hqv = to_host(q, st.get()), ho = to_host(out, st.get());
  oracle_check oc;
  // Heads 0, a middle one and the last, of the first and last rows: softmax(q.K / sqrt(d)) V.
  std::vector<std::uint16_t> kbits(std::size_t(context) * d), vbits(kbits.size());
  for (const int b : {0, batch - 1})
    for (const int h : {0, hq / 2 + 1, hq - 1}) {
      const int g = h / (hq / hk);
      const std::size_t base = ((std::size_t(b) * hk + g) * context) * d;
      KG_CUDA_CHECK(
          cudaMemcpy(kbits.data(), kc.get() + base, kbits.size() * 2, cudaMemcpyDeviceToHost));
      KG_CUDA_CHECK(
          cudaMemcpy(vbits.data(), vc.get() + base, vbits.size() * 2, cudaMemcpyDeviceToHost));
      std::vector<double> score(context);
      double mx = -INFINITY;
      for (int t = 0; t < context; ++t) {
        double dot = 0;
        for (int i = 0; i < d; ++i)
          dot += hqv[(std::size_t(b) * hq + h) * d + i] * bf16_value(kbits[std::size_t(t) * d + i]);
        score[t] = dot / std::sqrt(static_cast<double>(d));
        mx = std::max(mx, score[t]);
      }
      double z = 0;
      for (auto& e : score)
        z += (e = std::exp(e - mx));
      for (int i = 0; i < d; ++i) {
        double ref = 0, mag = 0;
        for (int t = 0; t < context; ++t) {
          const double v = bf16_value(vbits[std::size_t(t) * d + i]);
          ref += score[t] / z * v;
          mag += score[t] / z * std::fabs(v);
        }
        oc.add(ho[(std::size_t(b) * hq + h) * d + i], ref,
               std::ldexp(std::fabs(ref), -8) + 2e-3 * mag,
               "out[" + std::to_string(b) + ", head " + std::to_string(h) + ", " +
                   std::to_string(i) + "]");
      }
    }
  auto m = timed(s, w, launch);
  m.gates.push_back(oc.gate("2^-8 |ref| + 2e-3 sum p |v|"));
  return m;
}

measured_workload run_rmsnorm(suite_gpu_session::impl& s, const suite_workload& w, bool residual) {
  const int batch = param(w, "batch"), cols = param(w, "cols");
  const double eps = 1e-6;
  cuda_stream st;
  const auto hidden = random_bf16(std::size_t(batch) * cols, 6, 0.5f, 2.0f, st.get());
  const auto delta = random_bf16(hidden.n, 7, -0.25f, 1.0f, st.get());
  const auto weight = random_bf16(std::size_t(cols), 8, 1.0f, 0.5f, st.get());
  bf16_buffer out{device_buffer(hidden.n * 2), hidden.n};
  const auto h0 = to_host(hidden, st.get()), d0 = to_host(delta, st.get()),
             wt = to_host(weight, st.get());
  auto launch = [&](cudaStream_t q) {
    KG_CUDA_CHECK(decode::launch_add_rmsnorm(residual ? delta.get() : nullptr, hidden.get(),
                                             weight.get(), out.get(), batch, cols,
                                             static_cast<float>(eps), q));
  };
  launch(st.get());
  const auto ho = to_host(out, st.get()), hh = to_host(hidden, st.get());
  oracle_check oc;
  for (int b = 0; b < batch; ++b) {
    std::vector<double> h(cols);
    double ss = 0;
    for (int i = 0; i < cols; ++i) {
      h[i] = h0[std::size_t(b) * cols + i] + (residual ? d0[std::size_t(b) * cols + i] : 0.0);
      ss += h[i] * h[i];
    }
    const double r = 1.0 / std::sqrt(ss / cols + eps);
    for (int i = 0; i < cols; ++i) {
      const std::size_t at = std::size_t(b) * cols + i;
      if (residual)
        oc.add(hh[at], h[i], std::ldexp(std::fabs(h[i]), -8) + 1e-30,
               "hidden[" + std::to_string(at) + "]");
      const double ref = wt[i] * h[i] * r;
      // Three bf16 roundings on the way (sum, normalized, product): 3 x 2^-8 relative.
      oc.add(ho[at], ref, 3 * std::ldexp(std::fabs(ref), -8) + 1e-6,
             "out[" + std::to_string(at) + "]");
    }
  }
  auto m = timed(s, w, launch);
  m.gates.push_back(oc.gate(residual ? "hidden 2^-8, out 3 x 2^-8 relative" : "3 x 2^-8 relative"));
  return m;
}

measured_workload run_qk_norm_rope(suite_gpu_session::impl& s, const suite_workload& w) {
  const qwen3_config c;
  const int batch = param(w, "batch"), context = param(w, "context");
  const int hq = static_cast<int>(c.q_heads), hk = static_cast<int>(c.kv_heads),
            d = static_cast<int>(c.head_dim);
  const int stride = (hq + 2 * hk) * d, max_context = context + 1;
  cuda_stream st;
  const auto qkv = random_bf16(std::size_t(batch) * stride, 9, 0.1f, 1.0f, st.get());
  const auto qw = random_bf16(std::size_t(d), 10, 1.0f, 0.5f, st.get());
  const auto kw = random_bf16(std::size_t(d), 11, 1.0f, 0.5f, st.get());
  const std::size_t cache = std::size_t(batch) * hk * max_context * d;
  bf16_buffer kc{device_buffer(cache * 2), cache}, vc{device_buffer(cache * 2), cache};
  std::vector<int> slots(batch), pos(batch, context);
  std::iota(slots.begin(), slots.end(), 0);
  const auto dslots = ints_to_device(slots, st.get()), dpos = ints_to_device(pos, st.get());
  const auto in = to_host(qkv, st.get()), hqw = to_host(qw, st.get()), hkw = to_host(kw, st.get());
  auto launch = [&](cudaStream_t q) {
    KG_CUDA_CHECK(decode::launch_qk_norm_rope_append(
        qkv.get(), batch, stride, hq, hk, d, qw.get(), kw.get(), static_cast<float>(c.rms_eps),
        static_cast<const int*>(dpos.get()), c.rope_theta, static_cast<const int*>(dslots.get()),
        kc.get(), vc.get(), max_context, q));
  };
  launch(st.get());
  const auto outv = to_host(qkv, st.get());
  oracle_check oc;
  std::vector<std::uint16_t> cached(d);
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < hq + 2 * hk; ++h) {
      const std::size_t at = std::size_t(b) * stride + std::size_t(h) * d;
      if (h >= hq + hk) { // v: appended as is
        KG_CUDA_CHECK(cudaMemcpy(
            cached.data(),
            vc.get() + ((std::size_t(b) * hk + (h - hq - hk)) * max_context + context) * d, d * 2,
            cudaMemcpyDeviceToHost));
        for (int i = 0; i < d; ++i)
          oc.add(bf16_value(cached[i]), in[at + i], 1e-30, "v cache row " + std::to_string(b));
        continue;
      }
      const auto& wt = h < hq ? hqw : hkw;
      double ss = 0;
      for (int i = 0; i < d; ++i)
        ss += in[at + i] * in[at + i];
      const double r = 1.0 / std::sqrt(ss / d + c.rms_eps);
      std::vector<double> n(d), ref(d);
      for (int i = 0; i < d; ++i)
        n[i] = in[at + i] * r * wt[i];
      for (int i = 0; i < d / 2; ++i) {
        const double angle = context * std::pow(c.rope_theta, -2.0 * i / d);
        ref[i] = n[i] * std::cos(angle) - n[i + d / 2] * std::sin(angle);
        ref[i + d / 2] = n[i + d / 2] * std::cos(angle) + n[i] * std::sin(angle);
      }
      for (int i = 0; i < d; ++i)
        oc.add(outv[at + i], ref[i],
               4 * std::ldexp(std::fabs(n[i]) + std::fabs(n[(i + d / 2) % d]), -8) + 1e-6,
               (h < hq ? "q" : "k") + std::string(" row ") + std::to_string(b) + " head " +
                   std::to_string(h));
    }
  auto m = timed(s, w, launch);
  m.gates.push_back(oc.gate("q, k: 4 x 2^-8 (|n_i| + |n_pair|); v appended exactly"));
  return m;
}

measured_workload run_silu_mul(suite_gpu_session::impl& s, const suite_workload& w) {
  const int batch = param(w, "batch"), inter = param(w, "inter");
  cuda_stream st;
  const auto gu = random_bf16(std::size_t(batch) * 2 * inter, 12, 0.0f, 3.0f, st.get());
  bf16_buffer out{device_buffer(std::size_t(batch) * inter * 2), std::size_t(batch) * inter};
  auto launch = [&](cudaStream_t q) {
    KG_CUDA_CHECK(decode::launch_silu_gate_mul(gu.get(), out.get(), batch, inter, q));
  };
  launch(st.get());
  const auto hg = to_host(gu, st.get()), ho = to_host(out, st.get());
  oracle_check oc;
  for (int b = 0; b < batch; ++b)
    for (int i = 0; i < inter; ++i) {
      const double g = hg[std::size_t(b) * 2 * inter + i],
                   u = hg[std::size_t(b) * 2 * inter + inter + i];
      const double ref = g / (1 + std::exp(-g)) * u;
      oc.add(ho[std::size_t(b) * inter + i], ref, 2 * std::ldexp(std::fabs(ref), -8) + 1e-30,
             "out[" + std::to_string(b) + ", " + std::to_string(i) + "]");
    }
  auto m = timed(s, w, launch);
  m.gates.push_back(oc.gate("2 x 2^-8 relative"));
  return m;
}

measured_workload run_argmax(suite_gpu_session::impl& s, const suite_workload& w) {
  const int batch = param(w, "batch"), cols = param(w, "cols");
  cuda_stream st;
  const auto x = random_bf16(std::size_t(batch) * cols, 13, 0.0f, 4.0f, st.get());
  device_buffer out(std::size_t(batch) * sizeof(int));
  auto launch = [&](cudaStream_t q) {
    KG_CUDA_CHECK(decode::launch_argmax(x.get(), static_cast<int*>(out.get()), batch, cols, q));
  };
  launch(st.get());
  const auto hx = to_host(x, st.get());
  const auto got = ints_to_host(out, batch, st.get());
  oracle_check oc;
  for (int b = 0; b < batch; ++b) {
    const auto first = hx.begin() + std::ptrdiff_t(b) * cols;
    const int ref = static_cast<int>(std::max_element(first, first + cols) - first); // first max
    oc.add(got[b], ref, 0.5, "row " + std::to_string(b));
  }
  auto m = timed(s, w, launch);
  m.gates.push_back(oc.gate("the first index of the maximum, exactly"));
  return m;
}

measured_workload run_embedding(suite_gpu_session::impl& s, const suite_workload& w) {
  const qwen3_config c;
  const int batch = param(w, "batch"), cols = param(w, "cols");
  cuda_stream st;
  const auto table = random_bf16(std::size_t(c.vocab) * cols, 14, 0.0f, 0.02f, st.get());
  std::vector<int> tokens(batch);
  for (int b = 0; b < batch; ++b)
    tokens[b] = static_cast<int>((std::int64_t(b) * 7919 + 1) % c.vocab);
  tokens.back() = static_cast<int>(c.vocab - 1); // the table's last row too
  const auto dt = ints_to_device(tokens, st.get());
  bf16_buffer out{device_buffer(std::size_t(batch) * cols * 2), std::size_t(batch) * cols};
  auto launch = [&](cudaStream_t q) {
    KG_CUDA_CHECK(decode::launch_embedding_gather(table.get(), static_cast<const int*>(dt.get()),
                                                  out.get(), batch, cols, q));
  };
  launch(st.get());
  const auto ho = to_host(out, st.get());
  oracle_check oc;
  std::vector<std::uint16_t> row(cols);
  for (int b = 0; b < batch; ++b) {
    KG_CUDA_CHECK(cudaMemcpy(row.data(), table.get() + std::size_t(tokens[b]) * cols, cols * 2,
                             cudaMemcpyDeviceToHost));
    for (int i = 0; i < cols; ++i)
      oc.add(ho[std::size_t(b) * cols + i], bf16_value(row[i]), 1e-30, "row " + std::to_string(b));
  }
  auto m = timed(s, w, launch);
  m.gates.push_back(oc.gate("the token's table row, exactly"));
  return m;
}

measured_workload run_lora_gemm(suite_gpu_session::impl& s, const suite_workload& w) {
  int device = 0;
  KG_CUDA_CHECK(cudaGetDevice(&device));
  torch_matmul mm(param(w, "m"), param(w, "n"), param(w, "k"), 20261201);
  cuda_stream st;
  mm.enqueue(st.get(), device);
  KG_CUDA_CHECK(cudaStreamSynchronize(st.get()));
  const double worst = mm.worst_relative_error(64);
  auto m = timed(s, w, [&](cudaStream_t q) { mm.enqueue(q, device); });
  std::ostringstream d;
  d << "64 elements checked; worst |c - ref| / sum |a b| = " << worst << " (limit 2^-7)";
  m.gates.push_back({"oracle_fp64", worst <= std::ldexp(1.0, -7), d.str()});
  return m;
}

} // namespace

void check_gemv_override(role_override& o) {
  const qwen3_config c;
  int n = 0, k = 0;
  for (const auto& g : decode_gemms(c))
    if (g.name == o.projection) {
      n = static_cast<int>(g.n);
      k = static_cast<int>(g.k);
    }
  cuda_stream st;
  for (const int batch : {1, 2, 8, 32}) { // the batch sizes the suites and the engine call
    const auto op = gemv_inputs(batch, n, k, st.get());
    // NaN-filled output first, as eval fills it: what the kernel leaves unwritten fails.
    KG_CUDA_CHECK(cudaMemsetAsync(op.y.get(), 0xff, op.y.n * 2, st.get()));
    const cudaError_t e = o.launch(op.x.get(), op.w.get(), op.y.get(), batch, n, k, st.get());
    if (e == cudaSuccess) KG_CUDA_CHECK(cudaStreamSynchronize(st.get()));
    if (e != cudaSuccess)
      throw override_error("--override " + o.role + ": kg_run failed at batch " +
                           std::to_string(batch) + ": " + cudaGetErrorString(e));
    const auto oc = gemv_oracle(op.x, op.w, op.y, batch, n, k, st.get());
    const auto gate = oc.gate(gemv_tolerance_rule);
    o.oracle.push_back(
        {{"batch", batch}, {"n", n}, {"k", k}, {"pass", gate.pass}, {"detail", gate.detail}});
    if (!gate.pass)
      throw override_error("--override " + o.role + ": " + o.source.string() +
                           " fails the fp64 oracle at batch " + std::to_string(batch) + ", " +
                           std::to_string(n) + " x " + std::to_string(k) + ": " + gate.detail);
  }
}

measured_workload run_kernel_workload(suite_gpu_session::impl& s, const suite_workload& w) {
  if (w.kind == "gemv") return run_gemv(s, w);
  if (w.kind == "attention") return run_attention(s, w);
  if (w.kind == "rmsnorm") return run_rmsnorm(s, w, false);
  if (w.kind == "add_rmsnorm") return run_rmsnorm(s, w, true);
  if (w.kind == "qk_norm_rope") return run_qk_norm_rope(s, w);
  if (w.kind == "silu_mul") return run_silu_mul(s, w);
  if (w.kind == "argmax") return run_argmax(s, w);
  if (w.kind == "embedding") return run_embedding(s, w);
  if (w.kind == "lora_gemm") return run_lora_gemm(s, w);
  throw std::invalid_argument("no kernel-level executor for kind '" + w.kind + "'");
}

} // namespace kg
