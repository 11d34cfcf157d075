// The decode engine end to end: (b) the tiny model's one-step logits against a host reference
// forward of the same weights and cache (double math, bf16 rounding where the engine stores
// bf16); (c) graph replay bit-identical to eager launches, to a second replay and to a second
// engine of the same seed; (d) Qwen3-4B logits bit-identical on a 33-SM green partition and on
// the whole GPU, batch 1 and 8 -- the solo vs co-located gate.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bf16_host.h"
#include "gpu/cuda_check.h"
#include "gpu/cuda_raii.h"
#include "gpu/device_buffer.h"
#include "gpu/green_partition.h"
#include "gpu_test_support.h"
#include "kernels/decode/decode_engine.h"
#include "kernels/decode/decode_kernels.h"

using namespace kg;
using namespace kg::test;

namespace kg::test {
cudaError_t launch_record_smid(unsigned* out, int blocks, cudaStream_t s); // graph_smid_probe.cu
}

namespace {

using vec = std::vector<double>;

vec host_copy(const __nv_bfloat16* p, std::size_t n, cudaStream_t s) {
  const auto bits = copy_bf16_to_host(p, n, s);
  vec v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = bf16_to_float(bits[i]);
  return v;
}

vec round_all(vec v) {
  for (auto& x : v)
    x = round_bf16(x);
  return v;
}

// y[n] = sum_k x[k] w[n, k], rounded to bf16 as the GEMV stores it.
vec matvec(const vec& x, const vec& w, std::int64_t n, std::int64_t k) {
  vec y(static_cast<std::size_t>(n));
  for (std::int64_t r = 0; r < n; ++r) {
    double acc = 0;
    for (std::int64_t i = 0; i < k; ++i)
      acc += x[static_cast<std::size_t>(i)] * w[static_cast<std::size_t>(r * k + i)];
    y[static_cast<std::size_t>(r)] = acc;
  }
  return y;
}

void rmsnorm(double* x, std::int64_t n, const double* w, double eps) {
  double ss = 0;
  for (std::int64_t i = 0; i < n; ++i)
    ss += x[i] * x[i];
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (std::int64_t i = 0; i < n; ++i)
    x[i] = round_bf16(w[i] * round_bf16(x[i] * inv));
}

// The engine's weights and one slot's cache (positions < pos) on the host, and the forward of
// one row in the engine's order of operations.
struct host_reference {
  const decode_engine& e;
  struct layer {
    vec in_norm, qkv, q_norm, k_norm, o, post, gate_up, down, k_cache, v_cache;
  };
  std::vector<layer> layers;
  vec embed, final_norm;

  explicit host_reference(const decode_engine& eng) : e(eng) {
    const auto& m = e.config().model;
    const auto s = decode_engine_sizes_of(e.config());
    const cudaStream_t st = e.stream();
    for (int l = 0; l < m.layers; ++l) {
      const auto& w = e.layer(l);
      layers.push_back({host_copy(w.input_norm, m.hidden, st),
                        host_copy(w.qkv, s.qkv_width * m.hidden, st),
                        host_copy(w.q_norm, m.head_dim, st),
                        host_copy(w.k_norm, m.head_dim, st),
                        host_copy(w.o_proj, m.hidden * m.q_heads * m.head_dim, st),
                        host_copy(w.post_norm, m.hidden, st),
                        host_copy(w.gate_up, 2 * m.intermediate * m.hidden, st),
                        host_copy(w.down, m.hidden * m.intermediate, st),
                        {},
                        {}});
    }
    embed = host_copy(e.embedding(), m.vocab * m.hidden, st);
    final_norm = host_copy(e.final_norm(), m.hidden, st);
  }
  // Reads the caches as they are now (call after the prefills, before the step).
  void read_caches() {
    for (int l = 0; l < static_cast<int>(layers.size()); ++l) {
      layers[l].k_cache = host_copy(e.k_cache(l), e.cache_elements_per_layer(), e.stream());
      layers[l].v_cache = host_copy(e.v_cache(l), e.cache_elements_per_layer(), e.stream());
    }
  }

  vec logits(int token, int pos, int slot) const {
    const auto& m = e.config().model;
    const std::int64_t H = m.hidden, I = m.intermediate, D = m.head_dim, hq = m.q_heads,
                       hk = m.kv_heads, qkvw = (hq + 2 * hk) * D;
    const double eps = m.rms_eps;
    vec h(embed.begin() + token * H, embed.begin() + (token + 1) * H), mlp;
    for (const auto& L : layers) {
      if (!mlp.empty())
        for (std::int64_t i = 0; i < H; ++i)
          h[i] = round_bf16(h[i] + mlp[i]);
      vec x = h;
      rmsnorm(x.data(), H, L.in_norm.data(), eps);
      vec qkv = round_all(matvec(x, L.qkv, qkvw, H));
      for (std::int64_t j = 0; j < hq + hk; ++j)
        rmsnorm(&qkv[j * D], D, j < hq ? L.q_norm.data() : L.k_norm.data(), eps);
      for (std::int64_t j = 0; j < hq + hk; ++j)
        for (std::int64_t i = 0; i < D / 2; ++i) {
          const double a = pos * std::pow(m.rope_theta, -2.0 * i / D);
          const float c = static_cast<float>(std::cos(a)), s = static_cast<float>(std::sin(a));
          double* p = &qkv[j * D];
          const float x1 = static_cast<float>(p[i]), x2 = static_cast<float>(p[i + D / 2]);
          p[i] = round_bf16(x1 * c - x2 * s);
          p[i + D / 2] = round_bf16(x2 * c + x1 * s);
        }
      vec att(hq * D);
      const std::size_t per_slot = static_cast<std::size_t>(hk) * e.config().max_context * D;
      for (std::int64_t qh = 0; qh < hq; ++qh) {
        const std::int64_t g = qh / (hq / hk);
        auto key = [&](int t, bool v, std::int64_t d) {
          if (t == pos) return qkv[((v ? hq + hk : hq) + g) * D + d];
          const auto& c = v ? L.v_cache : L.k_cache;
          return c[slot * per_slot + (g * e.config().max_context + t) * D + d];
        };
        vec s(pos + 1);
        double mx = -1e300;
        for (int t = 0; t <= pos; ++t) {
          double dot = 0;
          for (std::int64_t d = 0; d < D; ++d)
            dot += qkv[qh * D + d] * key(t, false, d);
          s[t] = dot / std::sqrt(static_cast<double>(D));
          mx = std::max(mx, s[t]);
        }
        double sum = 0;
        for (auto& v : s)
          sum += (v = std::exp(v - mx));
        for (std::int64_t d = 0; d < D; ++d) {
          double o = 0;
          for (int t = 0; t <= pos; ++t)
            o += s[t] * key(t, true, d);
          att[qh * D + d] = round_bf16(o / sum);
        }
      }
      const vec o = round_all(matvec(att, L.o, H, hq * D));
      for (std::int64_t i = 0; i < H; ++i)
        h[i] = round_bf16(h[i] + o[i]);
      x = h;
      rmsnorm(x.data(), H, L.post.data(), eps);
      const vec gu = round_all(matvec(x, L.gate_up, 2 * I, H));
      vec act(I);
      for (std::int64_t i = 0; i < I; ++i)
        act[i] = round_bf16(gu[i] / (1 + std::exp(-gu[i])) * gu[I + i]);
      mlp = round_all(matvec(act, L.down, H, I));
    }
    for (std::int64_t i = 0; i < H; ++i)
      h[i] = round_bf16(h[i] + mlp[i]);
    rmsnorm(h.data(), H, final_norm.data(), eps);
    return matvec(h, embed, m.vocab, H);
  }
};

struct step_inputs {
  std::vector<int> tokens, positions, slots;
};

// Prefills each row's slot with its context, then one step at position = context.
step_inputs prefill_rows(decode_engine& e, const std::vector<int>& contexts) {
  step_inputs in;
  const int n = static_cast<int>(contexts.size());
  for (int b = 0; b < n; ++b) {
    const int slot = (b * 3 + 1) % e.config().max_batch; // not the row index
    e.prefill(slot, contexts[b]);
    in.tokens.push_back(static_cast<int>((b * 7919 + 11) % e.config().model.vocab));
    in.positions.push_back(contexts[b]);
    in.slots.push_back(slot);
  }
  return in;
}

std::size_t count_differences(const std::vector<std::uint16_t>& a,
                              const std::vector<std::uint16_t>& b, std::size_t* first) {
  std::size_t n = 0;
  *first = a.size();
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    if (a[i] != b[i] && n++ == 0) *first = i;
  return n + (a.size() > b.size() ? a.size() - b.size() : b.size() - a.size());
}

#define EXPECT_SAME_BITS(a, b, what)                                                               \
  do {                                                                                             \
    std::size_t first_;                                                                            \
    const auto n_ = count_differences(a, b, &first_);                                              \
    EXPECT_EQ(n_, 0u) << what << ": " << n_ << " of " << (a).size()                                \
                      << " logits differ, the first at " << first_;                                \
  } while (0)

} // namespace

TEST(gpu_decode_engine, tiny_model_logits_match_the_host_reference) {
  KG_REQUIRE_GPU();
  cuda_stream s;
  decode_engine e(tiny_decode_engine_config(), s.get());
  const auto in = prefill_rows(e, {700, 0, 257}); // a long context, none, one past a chunk
  host_reference ref(e);
  ref.read_caches();
  e.step(in.tokens, in.positions, in.slots);
  const auto got = e.logits_bits(3);
  const auto next = e.next_tokens(3);
  const auto V = e.config().model.vocab;
  for (int b = 0; b < 3; ++b) {
    const auto want = ref.logits(in.tokens[b], in.positions[b], in.slots[b]);
    double worst = 0, scale = 0, diff_ss = 0, want_ss = 0;
    std::size_t at = 0;
    for (std::int64_t i = 0; i < V; ++i) {
      const double d = std::fabs(bf16_to_float(got[b * V + i]) - want[i]);
      scale = std::max(scale, std::fabs(want[i]));
      diff_ss += d * d;
      want_ss += want[i] * want[i];
      if (d > worst) worst = d, at = static_cast<std::size_t>(i);
    }
    // In aggregate the difference is bf16 noise (a few 1e-3 of the logits' RMS); a wrong
    // attention or MLP moves the logits by 10% or more of it in this model.
    EXPECT_LE(std::sqrt(diff_ss), 0.02 * std::sqrt(want_ss))
        << "row " << b << ": RMS difference " << std::sqrt(diff_ss / V) << " vs logits RMS "
        << std::sqrt(want_ss / V);
    // bf16 storage between kernels: each element is off by up to ~2^-8 relative, and two layers
    // of it move a logit by a few bf16 steps of the largest logit.
    EXPECT_LE(worst, 0.03 * scale) << "row " << b << ": worst logit difference " << worst << " at "
                                   << at << " (largest |logit| " << scale << ")";
    EXPECT_GT(scale, 0.0) << "row " << b << ": all-zero logits";
    // The greedy token is the first maximum of the engine's own logits.
    int best = 0;
    for (std::int64_t i = 1; i < V; ++i)
      if (bf16_to_float(got[b * V + i]) > bf16_to_float(got[b * V + best]))
        best = static_cast<int>(i);
    EXPECT_EQ(next[b], best) << "row " << b;
  }
}

TEST(gpu_decode_engine, graph_replay_is_bit_identical_to_eager_and_repeats) {
  KG_REQUIRE_GPU();
  cuda_stream s;
  const auto c = tiny_decode_engine_config();
  decode_engine e(c, s.get());
  for (const auto& contexts :
       {std::vector<int>{513}, std::vector<int>{9, 1000, 0, 256, 255, 77, 600, 1}}) {
    const int n = static_cast<int>(contexts.size());
    const auto in = prefill_rows(e, contexts);
    e.step(in.tokens, in.positions, in.slots, /*eager=*/true);
    const auto eager = e.logits_bits(n);
    e.step(in.tokens, in.positions, in.slots);
    const auto graph1 = e.logits_bits(n);
    e.step(in.tokens, in.positions, in.slots);
    const auto graph2 = e.logits_bits(n);
    EXPECT_SAME_BITS(eager, graph1, "batch " << n << " eager vs graph");
    EXPECT_SAME_BITS(graph1, graph2, "batch " << n << " graph vs graph again");

    decode_engine e2(c, s.get()); // same seed: same weights and synthetic cache
    const auto in2 = prefill_rows(e2, contexts);
    e2.step(in2.tokens, in2.positions, in2.slots);
    EXPECT_SAME_BITS(graph1, e2.logits_bits(n), "batch " << n << " second engine");
  }
  EXPECT_EQ(e.graphs_captured(), 2);
}

// Programmatic launches (the engine's default) only let a kernel start before the one ahead has
// finished; each waits for its predecessor before touching memory, so eager and graph steps in
// either mode give one bit pattern. A kernel that read its input early would read the previous
// step's activations (a different token and position here) and differ.
TEST(gpu_decode_engine, programmatic_and_plain_launches_give_identical_logits) {
  KG_REQUIRE_GPU();
  cuda_stream s;
  const auto c = tiny_decode_engine_config();
  ASSERT_TRUE(c.programmatic_launch);
  decode_engine e(c, s.get());
  const auto in = prefill_rows(e, {9, 1000, 0, 256, 255, 77, 600, 1});
  const int n = static_cast<int>(in.tokens.size());
  std::vector<std::uint16_t> got[2][2]; // [programmatic][graph]
  for (const bool pl : {true, false}) {
    e.set_programmatic_launch(pl);
    EXPECT_EQ(e.config().programmatic_launch, pl);
    for (const bool graph : {false, true}) {
      // A different step first, so stale activations would show.
      std::vector<int> other = in.tokens;
      for (auto& t : other)
        t = (t + 17) % static_cast<int>(c.model.vocab);
      e.step(other, in.positions, in.slots, !graph);
      e.step(in.tokens, in.positions, in.slots, !graph);
      got[pl][graph] = e.logits_bits(n);
    }
    EXPECT_EQ(e.graphs_captured(), 1) << "each mode keeps its own graph";
  }
  EXPECT_SAME_BITS(got[0][0], got[1][0], "eager: plain vs programmatic");
  EXPECT_SAME_BITS(got[0][0], got[0][1], "plain: eager vs graph");
  EXPECT_SAME_BITS(got[0][0], got[1][1], "plain eager vs programmatic graph");
}

// The norms folded into the GEMVs (decode_engine_config::fold_norms) give the logits of the norm
// kernels, eager and from a graph, after a different step (stale activations would show), and the
// step's roles say which kernels ran: on the tiny model every batch's GEMVs are simt and fold all
// three norms.
TEST(gpu_decode_engine, norms_folded_into_the_gemvs_give_the_norm_kernels_logits) {
  KG_REQUIRE_GPU();
  cuda_stream s;
  auto c = tiny_decode_engine_config();
  c.fold_norms = true;
  decode_engine folded(c, s.get());
  c.fold_norms = false;
  decode_engine kernels(c, s.get());
  const std::vector<int> contexts = {9, 1000, 0, 256, 255, 77, 600, 1};
  const auto in = prefill_rows(folded, contexts);
  prefill_rows(kernels, contexts);
  const auto has = [](const std::vector<const char*>& r, const std::string& role) {
    return std::any_of(r.begin(), r.end(), [&](const char* x) { return role == x; });
  };
  for (const int n : {1, 3, 8}) {
    SCOPED_TRACE(::testing::Message() << "batch " << n);
    auto first = [n](std::vector<int> v) { return std::vector<int>(v.begin(), v.begin() + n); };
    const auto fl = folded.layer_roles(n), kl = kernels.layer_roles(n);
    EXPECT_TRUE(has(fl, "norm_qkv_gemv") && !has(fl, "input_rmsnorm") && !has(fl, "post_rmsnorm"));
    EXPECT_TRUE(has(kl, "input_rmsnorm") && has(kl, "post_rmsnorm") && !has(kl, "norm_qkv_gemv"));
    EXPECT_EQ(folded.tail_roles(n).size(), 2u);
    EXPECT_EQ(kernels.tail_roles(n).size(), 3u);
    kernels.step(first(in.tokens), first(in.positions), first(in.slots), true);
    const auto want = kernels.logits_bits(n);
    for (const bool eager : {true, false}) {
      std::vector<int> other = first(in.tokens);
      for (auto& t : other)
        t = (t + 17) % static_cast<int>(c.model.vocab);
      folded.step(other, first(in.positions), first(in.slots), eager);
      folded.step(first(in.tokens), first(in.positions), first(in.slots), eager);
      EXPECT_SAME_BITS(want, folded.logits_bits(n),
                       (eager ? "eager" : "graph") << ": norms folded vs their kernels");
    }
  }
}

// The attention merged in stage 1 (one kernel) gives the logits of the engine's own two-kernel
// configuration, eager and from a graph, step after step on the engine's counters; the step's
// kernel roles follow the configuration.
TEST(gpu_decode_engine, attention_merged_in_stage1_gives_the_picked_configurations_logits) {
  KG_REQUIRE_GPU();
  cuda_stream s;
  const auto c = tiny_decode_engine_config();
  decode_engine e(c, s.get());
  const auto in = prefill_rows(e, {9, 1000, 0, 256, 255, 77, 600, 1});
  const auto& m = c.model;
  auto has_stage_2 = [&](int n) {
    const auto r = e.layer_roles(n);
    return std::any_of(r.begin(), r.end(),
                       [](const char* x) { return std::string(x) == "attention_s2"; });
  };
  for (const int n : {1, 8}) {
    SCOPED_TRACE(::testing::Message() << "batch " << n);
    auto first = [n](std::vector<int> v) { return std::vector<int>(v.begin(), v.begin() + n); };
    e.set_attention_config(std::nullopt);
    EXPECT_TRUE(has_stage_2(n));
    e.step(first(in.tokens), first(in.positions), first(in.slots));
    const auto picked = e.logits_bits(n);
    decode::attention_config merged = decode::pick_attention_config(n);
    merged.merge_in_stage1 = true;
    ASSERT_TRUE(decode::attention_merges_in_stage1(merged, static_cast<int>(m.q_heads),
                                                   static_cast<int>(m.kv_heads),
                                                   static_cast<int>(m.head_dim), c.max_context));
    e.set_attention_config(merged);
    EXPECT_FALSE(has_stage_2(n));
    for (const bool eager : {true, false, false, false}) {
      e.step(first(in.tokens), first(in.positions), first(in.slots), eager);
      EXPECT_SAME_BITS(picked, e.logits_bits(n),
                       (eager ? "eager" : "graph") << ": merged in stage 1 vs stage 2");
    }
  }
  decode::attention_config bad = decode::default_attention_config();
  bad.tile = 48;
  EXPECT_THROW(e.set_attention_config(bad), std::invalid_argument);
}

TEST(gpu_decode_engine, qwen3_4b_logits_identical_on_a_green_partition_and_the_whole_gpu) {
  KG_REQUIRE_GPU();
  std::string why;
  auto p = green_partition::create(0, 33, &why);
  if (!p) GTEST_SKIP() << "no green partition on this GPU/driver: " << why;
  std::cout << "green partition: " << p->first_sms() << " of " << p->total_sms()
            << " SMs for the decode engine (asked 33)\n";
  decode_engine_config c; // Qwen3-4B
  c.max_batch = 8;
  c.max_context = 2304;
  cuda_stream whole;
  decode_engine solo(c, whole.get());
  decode_engine part(c, p->first_stream());
  for (const auto& contexts :
       {std::vector<int>{2048}, std::vector<int>{2048, 100, 513, 1, 2200, 256, 0, 1500}}) {
    const int n = static_cast<int>(contexts.size());
    const auto a = prefill_rows(solo, contexts), b = prefill_rows(part, contexts);
    solo.step(a.tokens, a.positions, a.slots);
    part.step(b.tokens, b.positions, b.slots);
    const auto la = solo.logits_bits(n), lb = part.logits_bits(n);
    EXPECT_SAME_BITS(la, lb,
                     "batch " << n << ", whole GPU vs " << p->first_sms() << "-SM partition");
    EXPECT_EQ(solo.next_tokens(n), part.next_tokens(n)) << "batch " << n;
    bool finite = true;
    for (const auto x : la)
      finite = finite && std::isfinite(bf16_to_float(x));
    EXPECT_TRUE(finite) << "batch " << n << ": non-finite logits after 36 layers";
  }
}

// The serving engine's batches above 32, and its prefill, on a green partition and on the whole
// GPU (issue 24: a cuBLAS call the engine makes must give the same bits on any partition, or not
// be used; cublas_gemm pins cuBLAS's SM count target to the whole device for that, and these
// tests are what checks it). One pair of engines a path, freed before the next: each holds 128
// slots of 640 tokens (12 GB of KV cache) beside its weights and their copies.
std::vector<int> mixed_contexts(int n) {
  std::vector<int> contexts;
  for (int b = 0; b < n; ++b)
    contexts.push_back((b * 37 + 11) % 600);
  return contexts;
}

void expect_same_steps_on_partition(const decode_engine_config& c, const green_partition& p,
                                    const char* path) {
  cuda_stream whole;
  decode_engine solo(c, whole.get());
  decode_engine part(c, p.first_stream());
  const auto contexts = mixed_contexts(c.max_batch);
  const auto a = prefill_rows(solo, contexts), b = prefill_rows(part, contexts);
  for (const int n : {33, 64, 128}) {
    auto first = [n](std::vector<int> v) { return std::vector<int>(v.begin(), v.begin() + n); };
    solo.step(first(a.tokens), first(a.positions), first(a.slots));
    part.step(first(b.tokens), first(b.positions), first(b.slots));
    EXPECT_SAME_BITS(solo.logits_bits(n), part.logits_bits(n),
                     path << ", batch " << n << ": whole GPU vs " << p.first_sms()
                          << "-SM partition");
  }
}

TEST(gpu_decode_engine, gemv_table_batches_above_32_identical_on_a_green_partition) {
  KG_REQUIRE_GPU();
  std::string why;
  auto p = green_partition::create(0, 33, &why);
  if (!p) GTEST_SKIP() << "no green partition on this GPU/driver: " << why;
  decode_engine_config c; // Qwen3-4B
  c.max_batch = 128;      // prefill_rows' slots (3b + 1) mod 128 are distinct
  c.max_context = 640;
  c.max_gemv_batch = 128; // every projection through the GEMV table (wgmma families at 33-128)
  expect_same_steps_on_partition(c, *p, "GEMV table");
}

TEST(gpu_decode_engine, cublas_decode_batches_and_prefill_identical_on_a_green_partition) {
  KG_REQUIRE_GPU();
  std::string why;
  auto p = green_partition::create(0, 33, &why);
  if (!p) GTEST_SKIP() << "no green partition on this GPU/driver: " << why;
  decode_engine_config c; // Qwen3-4B, the engine's default: cuBLAS GEMMs above batch 32
  c.max_batch = 128;
  c.max_context = 640;
  expect_same_steps_on_partition(c, *p, "cuBLAS above batch 32");
  // Prefill: the model over a 512-token prompt chunk through cuBLAS GEMMs, then one decode step
  // reading the K/V it wrote.
  c.max_batch = 8;
  c.max_prefill_tokens = 512;
  cuda_stream whole;
  decode_engine solo(c, whole.get());
  decode_engine part(c, p->first_stream());
  for (auto* e : {&solo, &part})
    e->prefill_chunk({{1, 0, 512, 20261204}});
  const auto next = solo.prefill_next_tokens(1);
  EXPECT_EQ(next, part.prefill_next_tokens(1));
  for (auto* e : {&solo, &part})
    e->step(next, {512}, {1});
  EXPECT_SAME_BITS(solo.logits_bits(1), part.logits_bits(1),
                   "after a 512-token cuBLAS prefill: whole GPU vs " << p->first_sms()
                                                                     << "-SM partition");
}

// The engine replays graphs on a green context's stream: the co-located measurements mean
// something only if a graph captured and launched there stays on the partition's SMs. (The
// bit-identity gate above holds either way; this says where the work ran.)
TEST(gpu_decode_engine, a_graph_captured_on_a_green_stream_stays_on_its_partition) {
  KG_REQUIRE_GPU();
  std::string why;
  auto p = green_partition::create(0, 33, &why);
  if (!p) GTEST_SKIP() << "no green partition on this GPU/driver: " << why;
  const int blocks = 4 * static_cast<int>(p->total_sms());
  device_buffer ids(static_cast<std::size_t>(blocks) * sizeof(unsigned));
  const cudaStream_t s = p->first_stream();
  KG_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  const cudaError_t launched = launch_record_smid(static_cast<unsigned*>(ids.get()), blocks, s);
  cudaGraph_t g = nullptr;
  KG_CUDA_CHECK(cudaStreamEndCapture(s, &g));
  KG_CUDA_CHECK(launched);
  cuda_graph_exec exec;
  exec.adopt(g);
  KG_CUDA_CHECK(cudaGraphLaunch(exec.get(), s));
  KG_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<unsigned> got(static_cast<std::size_t>(blocks));
  KG_CUDA_CHECK(
      cudaMemcpy(got.data(), ids.get(), got.size() * sizeof(unsigned), cudaMemcpyDeviceToHost));
  const std::set<unsigned> sms(got.begin(), got.end());
  std::cout << "graph on the green stream: " << blocks << " blocks ran on " << sms.size()
            << " distinct SMs; the partition has " << p->first_sms() << " of " << p->total_sms()
            << "\n";
  EXPECT_LE(sms.size(), p->first_sms())
      << "the graph's kernel left its partition: green-context graphs need another launch path";
}

namespace {

// The K or V cache of one block's positions [0, n), every layer and kv head, as doubles.
vec block_cache(const decode_engine& e, bool v, int start, int capacity, int n) {
  const auto& m = e.config().model;
  vec out;
  for (int l = 0; l < static_cast<int>(m.layers); ++l) {
    const auto all =
        host_copy(v ? e.v_cache(l) : e.k_cache(l), e.cache_elements_per_layer(), e.stream());
    for (std::int64_t g = 0; g < m.kv_heads; ++g)
      for (int t = 0; t < n; ++t)
        for (std::int64_t d = 0; d < m.head_dim; ++d)
          out.push_back(all[static_cast<std::size_t>(
              (static_cast<std::int64_t>(start) * m.kv_heads + g * capacity + t) * m.head_dim +
              d)]);
  }
  return out;
}

double rel_l2(const vec& got, const vec& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return den > 0 ? std::sqrt(num / den) : (num > 0 ? 1.0 : 0.0);
}

decode_engine_config tiny_prefill_config() {
  auto c = tiny_decode_engine_config();
  c.max_prefill_tokens = 64;
  c.kv_pool_tokens = 3000; // blocks placed by bind_slot, not slot x max_context
  return c;
}

} // namespace

// Chunked prefill against the decode path it must agree with: the same prompt fed token by token
// through decode steps (each checked against the host reference above) writes the cache and
// yields the first output token that the chunks must give. Different kernels (cuBLAS GEMMs,
// the tiled causal attention) round differently, so the cache agrees to bf16 noise; a wrong
// causal mask, position or block would move it by tens of percent.
TEST(gpu_decode_engine, chunked_prefill_matches_decoding_the_prompt_token_by_token) {
  KG_REQUIRE_GPU();
  cuda_stream s;
  const auto c = tiny_prefill_config();
  const int L = 150;
  const std::uint64_t prompt = 7;
  decode_engine by_decode(c, s.get());
  by_decode.bind_slot(5, 0, 300);
  int want_first = -1;
  for (int p = 0; p < L; ++p) {
    by_decode.step({by_decode.prompt_token(prompt, p)}, {p}, {5});
    if (p == L - 1) want_first = by_decode.next_tokens(1)[0];
  }
  const auto want_k = block_cache(by_decode, false, 0, 300, L);
  const auto want_v = block_cache(by_decode, true, 0, 300, L);

  // Three chunks (64, 64, 22 tokens), the block elsewhere in the pool.
  decode_engine chunked(c, s.get());
  chunked.bind_slot(2, 1000, 300);
  int got_first = -1;
  for (const auto& [begin, tokens] : {std::pair{0, 64}, {64, 64}, {128, 22}}) {
    chunked.prefill_chunk({{2, begin, tokens, prompt}});
    got_first = chunked.prefill_next_tokens(1)[0];
  }
  EXPECT_LE(rel_l2(block_cache(chunked, false, 1000, 300, L), want_k), 0.02);
  EXPECT_LE(rel_l2(block_cache(chunked, true, 1000, 300, L), want_v), 0.02);
  EXPECT_EQ(got_first, want_first);

  // Two prompts' parts in one chunk: each as if alone.
  decode_engine two(c, s.get());
  two.bind_slot(0, 2000, 300);
  two.bind_slot(1, 1500, 300);
  two.prefill_chunk({{0, 0, 40, prompt}, {1, 0, 24, 99}});
  const auto both = two.prefill_next_tokens(2);
  two.prefill_chunk({{0, 40, 64, prompt}});
  two.prefill_chunk({{0, 104, 46, prompt}});
  EXPECT_EQ(two.prefill_next_tokens(1)[0], want_first);
  EXPECT_LE(rel_l2(block_cache(two, false, 2000, 300, L), want_k), 0.02);
  decode_engine alone(c, s.get());
  alone.bind_slot(3, 0, 300);
  alone.prefill_chunk({{3, 0, 24, 99}});
  EXPECT_EQ(both[1], alone.prefill_next_tokens(1)[0]);
  EXPECT_LE(rel_l2(block_cache(two, true, 1500, 300, 24), block_cache(alone, true, 0, 300, 24)),
            0.02);

  // Parts the engine cannot take.
  EXPECT_THROW(chunked.prefill_chunk({{2, 290, 20, prompt}}), std::invalid_argument); // past block
  EXPECT_THROW(chunked.prefill_chunk({{2, 0, 65, prompt}}), std::invalid_argument);   // > 64 rows
  EXPECT_THROW(chunked.bind_slot(0, 2900, 200), std::invalid_argument);               // past pool
  EXPECT_THROW(decode_engine(tiny_decode_engine_config(), s.get()).prefill_chunk({{0, 0, 1, 1}}),
               std::invalid_argument); // no prefill buffers
}

namespace {

// One step of `n` rows of a tiny-model engine, row b at context (b * mul + add) % mod, and the
// logits of rows `check` against the host reference (relative L2 <= 0.02).
void expect_step_matches_reference(decode_engine& e, int n, int mul, int add, int mod,
                                   std::initializer_list<int> check) {
  std::vector<int> contexts;
  for (int b = 0; b < n; ++b)
    contexts.push_back((b * mul + add) % mod);
  const auto in = prefill_rows(e, contexts);
  host_reference ref(e);
  ref.read_caches();
  e.step(in.tokens, in.positions, in.slots);
  const auto got = e.logits_bits(n);
  const auto V = e.config().model.vocab;
  for (const int b : check) {
    const auto want = ref.logits(in.tokens[b], in.positions[b], in.slots[b]);
    vec row(static_cast<std::size_t>(V));
    for (std::int64_t i = 0; i < V; ++i)
      row[static_cast<std::size_t>(i)] = bf16_to_float(got[b * V + i]);
    EXPECT_LE(rel_l2(row, want), 0.02) << "row " << b;
  }
}

} // namespace

// max_gemv_batch above 32 (kg_bench_decode_step's batch 128): the GEMVs take batches of 40 rows
// (in as many launches as their configurations' batch groups need): the host reference's
// logits; and a user's GEMV override, checked at batch 1..32 only, is refused.
TEST(gpu_decode_engine, gemv_batches_above_32_match_the_reference_and_refuse_overrides) {
  KG_REQUIRE_GPU();
  cuda_stream s;
  auto c = tiny_decode_engine_config();
  c.max_batch = 40;
  c.max_gemv_batch = 40;
  decode_engine e(c, s.get());
  expect_step_matches_reference(e, 40, 37, 11, 900, {0, 33, 39});
  EXPECT_THROW(
      e.set_gemv_override("down", [](const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*,
                                     int, int, int, cudaStream_t) { return cudaSuccess; }),
      std::invalid_argument);
}

// Above 128 rows (max_gemv_batch up to 256) the engine runs each projection as GEMV launches of
// 128 rows: rows at both ends of the first launch and of the second (72 rows) match the host
// reference.
TEST(gpu_decode_engine, gemv_batches_above_128_run_as_128_row_launches_and_match_the_reference) {
  KG_REQUIRE_GPU();
  cuda_stream s;
  auto c = tiny_decode_engine_config();
  c.max_batch = 200; // prefill_rows' slots (3b + 1) mod 200 are distinct
  c.max_gemv_batch = 200;
  c.max_context = 640;
  decode_engine e(c, s.get());
  expect_step_matches_reference(e, 200, 53, 7, 600, {0, 127, 128, 199});
}

// Batches above max_gemv_batch run their projections through cuBLAS: the same logits as the
// host reference, as the GEMV's are.
TEST(gpu_decode_engine, batches_above_the_gemv_run_as_gemms_and_match_the_reference) {
  KG_REQUIRE_GPU();
  cuda_stream s;
  auto c = tiny_decode_engine_config();
  c.max_batch = 13; // prefill_rows' slots (3b + 1) mod 13 are distinct
  c.max_gemv_batch = 4;
  decode_engine e(c, s.get());
  expect_step_matches_reference(e, 13, 131, 5, 1000, {0, 6, 12});
}

// set_gemv_config (kg_bench_decode_step --gemv): at batch 3, every projection of the tiny model on
// another family than its table's simt rows -- wgmma_pk and packed read copies the engine makes
// then, lm_head's split K a workspace the table's rows never needed, gate_up at two rows a warp
// takes the SiLU gate -- gives the host reference's logits, with norms as kernels and folded
// (where a configuration cannot take its norm, the norm stays a kernel); the roles say which
// kernels ran and other batches keep the table's; nullopt gives the table's bits back; refusals.
TEST(gpu_decode_engine, gemv_configs_set_per_batch_match_the_reference_and_reset_to_the_table) {
  KG_REQUIRE_GPU();
  cuda_stream s;
  decode_engine e(tiny_decode_engine_config(), s.get());
  const std::vector<int> contexts = {9, 1000, 77};
  auto in = prefill_rows(e, contexts);
  e.step(in.tokens, in.positions, in.slots);
  const auto table = e.logits_bits(3);
  const std::pair<const char*, const char*> set[] = {{"qkv", "wgmma_pk:64,4,4,1"},
                                                     {"o_proj", "wgmma_sw:40,4,4,2,1"},
                                                     {"gate_up", "simt:2,4,2,1"},
                                                     {"down", "packed:16,8,2,1"},
                                                     {"lm_head", "mma:16,4,2,4"}};
  for (const auto& [p, text] : set)
    e.set_gemv_config(p, 3, parse_gemv_config(text));
  const auto has = [](const std::vector<const char*>& r, const std::string& role) {
    return std::any_of(r.begin(), r.end(), [&](const char* x) { return role == x; });
  };
  EXPECT_TRUE(has(e.layer_roles(3), "gate_up_silu_gemv"));
  EXPECT_FALSE(has(e.layer_roles(3), "silu_gate"));
  EXPECT_TRUE(has(e.layer_roles(2), "silu_gate")); // the table's simt:1,8,4,1 has no gate
  expect_step_matches_reference(e, 3, 37, 9, 1000, {0, 1, 2});
  e.set_fold_norms(true);
  // qkv on wgmma_pk cannot take the input norm; gate_up's simt row takes the post norm and gate.
  EXPECT_TRUE(has(e.layer_roles(3), "input_rmsnorm"));
  EXPECT_TRUE(has(e.layer_roles(3), "norm_gate_up_silu_gemv"));
  EXPECT_TRUE(has(e.layer_roles(2), "norm_qkv_gemv"));
  expect_step_matches_reference(e, 3, 41, 3, 1000, {0, 1, 2});
  e.set_fold_norms(false);
  for (const auto& [p, text] : set)
    e.set_gemv_config(p, 3, std::nullopt);
  EXPECT_TRUE(has(e.layer_roles(3), "silu_gate"));
  in = prefill_rows(e, contexts);
  e.step(in.tokens, in.positions, in.slots);
  EXPECT_SAME_BITS(table, e.logits_bits(3), "the table's rows again");
  const gemv_config simt{2, 4, 2, 1};
  EXPECT_THROW(e.set_gemv_config("qkv_proj", 1, simt), std::invalid_argument);
  EXPECT_THROW(e.set_gemv_config("qkv", 0, simt), std::invalid_argument);
  EXPECT_THROW(e.set_gemv_config("qkv", 9, simt), std::invalid_argument); // max_batch 8
  EXPECT_THROW(e.set_gemv_config("qkv", 1, *parse_gemv_config("sweep:9,8,2,1")),
               std::invalid_argument);
}

// The SiLU gate as the epilogue of a wgmma_pk gate_up GEMV (over the paired copy the engine makes
// when the configuration is set) gives the bits of the GEMV then the gate kernel
// (set_gate_in_gemv(false)), eager and from a graph, and the host reference's logits.
TEST(gpu_decode_engine, the_gate_in_a_wgmma_pk_epilogue_gives_the_gate_kernels_logits) {
  KG_REQUIRE_GPU();
  cuda_stream s;
  decode_engine e(tiny_decode_engine_config(), s.get());
  e.set_gemv_config("gate_up", 3, parse_gemv_config("wgmma_pk:64,4,4,1"));
  const auto has = [](const std::vector<const char*>& r, const std::string& role) {
    return std::any_of(r.begin(), r.end(), [&](const char* x) { return role == x; });
  };
  EXPECT_TRUE(has(e.layer_roles(3), "gate_up_silu_gemv"));
  const auto in = prefill_rows(e, {9, 1000, 77});
  std::vector<std::uint16_t> got[2][2]; // [gate in the GEMV][graph]
  for (const bool gated : {true, false}) {
    e.set_gate_in_gemv(gated);
    EXPECT_EQ(has(e.layer_roles(3), "silu_gate"), !gated);
    for (const bool graph : {false, true}) {
      e.step(in.tokens, in.positions, in.slots, !graph);
      got[gated][graph] = e.logits_bits(3);
    }
  }
  EXPECT_SAME_BITS(got[0][0], got[1][0], "eager: gate kernel vs epilogue");
  EXPECT_SAME_BITS(got[0][0], got[1][1], "gate kernel eager vs epilogue graph");
  EXPECT_SAME_BITS(got[0][0], got[0][1], "gate kernel: eager vs graph");
  e.set_gate_in_gemv(true);
  expect_step_matches_reference(e, 3, 29, 5, 1000, {0, 1, 2});
}
