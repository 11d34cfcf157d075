// The decode engine's kernels (kernels/decode) against host references in double, on odd shapes
// (rows that fill no block, lengths one past a chunk, slots out of order), and each run twice to
// check the bits repeat. Failures print the worst element so an H200 log says what broke.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "bf16_host.h"
#include "gpu_test_support.h"
#include "kernels/decode/decode_kernels.h"
#include "timing/cuda_check.h"
#include "timing/device_buffer.h"

using namespace kg;
using namespace kg::test;

namespace {

std::vector<std::uint16_t> random_bf16(std::size_t n, double sd, unsigned seed, double mean = 0) {
  std::mt19937 g(seed);
  std::normal_distribution<double> d(mean, sd);
  std::vector<std::uint16_t> v(n);
  for (auto& x : v)
    x = float_to_bf16(static_cast<float>(d(g)));
  return v;
}

template <typename T>
device_buffer upload(const std::vector<T>& v) {
  device_buffer b(v.size() * sizeof(T));
  KG_CUDA_CHECK(cudaMemcpy(b.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return b;
}

template <typename T>
std::vector<T> download(const device_buffer& b, std::size_t n) {
  std::vector<T> v(n);
  KG_CUDA_CHECK(cudaMemcpy(v.data(), b.get(), n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

__nv_bfloat16* bf(const device_buffer& b) {
  return static_cast<__nv_bfloat16*>(b.get());
}
int* ip(const device_buffer& b) {
  return static_cast<int*>(b.get());
}

// Worst |got - want| beyond atol + rtol |want|, with where it happened.
struct closeness {
  std::size_t bad = 0, worst_at = 0;
  double worst = 0, got = 0, want = 0;
};
closeness compare(const std::vector<std::uint16_t>& got, const std::vector<double>& want,
                  double atol, double rtol) {
  closeness c;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double g = bf16_to_float(got[i]), e = std::fabs(g - want[i]);
    const double excess = e - (atol + rtol * std::fabs(want[i]));
    if (excess > 0) ++c.bad;
    if (e > c.worst) c = {c.bad, i, e, g, want[i]};
  }
  return c;
}
#define EXPECT_CLOSE(got_, want_, atol_, rtol_)                                                    \
  do {                                                                                             \
    const auto c_ = compare(got_, want_, atol_, rtol_);                                            \
    EXPECT_EQ(c_.bad, 0u) << c_.bad << " of " << (want_).size() << " elements beyond atol "        \
                          << atol_ << " rtol " << rtol_ << "; worst at " << c_.worst_at            \
                          << ": got " << c_.got << " want " << c_.want;                            \
  } while (0)

double rms_inv(const double* x, int n, double eps) {
  double ss = 0;
  for (int i = 0; i < n; ++i)
    ss += x[i] * x[i];
  return 1.0 / std::sqrt(ss / n + eps);
}

} // namespace

TEST(gpu_decode_kernels, add_rmsnorm_matches_hf_rounding) {
  KG_REQUIRE_GPU();
  const int rows = 3, cols = 1000;
  const auto x = random_bf16(rows * cols, 1.0, 1), d = random_bf16(rows * cols, 0.5, 2),
             w = random_bf16(cols, 0.05, 3, 1.0);
  for (const bool with_delta : {false, true}) {
    auto hx = upload(x), dd = upload(d), dw = upload(w);
    device_buffer out(rows * cols * 2);
    KG_CUDA_CHECK(decode::launch_add_rmsnorm(with_delta ? bf(dd) : nullptr, bf(hx), bf(dw), bf(out),
                                             rows, cols, 1e-6f, nullptr));
    KG_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<double> h(rows * cols), want(rows * cols);
    for (int i = 0; i < rows * cols; ++i)
      h[i] =
          with_delta ? round_bf16(bf16_to_float(x[i]) + bf16_to_float(d[i])) : bf16_to_float(x[i]);
    for (int r = 0; r < rows; ++r) {
      const double inv = rms_inv(&h[r * cols], cols, 1e-6);
      for (int c = 0; c < cols; ++c)
        want[r * cols + c] = bf16_to_float(w[c]) * round_bf16(h[r * cols + c] * inv);
    }
    // The residual sum is one exact rounding: bit for bit.
    const auto got_h = download<std::uint16_t>(hx, rows * cols);
    for (int i = 0; i < rows * cols; ++i)
      ASSERT_EQ(bf16_to_float(got_h[i]), h[i]) << "residual element " << i;
    EXPECT_CLOSE(download<std::uint16_t>(out, rows * cols), want, 1e-6, 8e-3);
  }
}

TEST(gpu_decode_kernels, head_rmsnorm_normalizes_each_head_and_nothing_else) {
  KG_REQUIRE_GPU();
  for (const int D : {64, 128}) {
    const int rows = 3, heads = 5, stride = heads * D + 24; // 24 trailing elements untouched
    const auto x = random_bf16(rows * stride, 2.0, 4), w = random_bf16(D, 0.05, 5, 1.0);
    auto dx = upload(x), dw = upload(w);
    KG_CUDA_CHECK(
        decode::launch_head_rmsnorm(bf(dx), rows, stride, heads, D, bf(dw), 1e-6f, nullptr));
    KG_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<double> want(rows * stride);
    for (int r = 0; r < rows; ++r) {
      for (int i = 0; i < stride; ++i)
        want[r * stride + i] = bf16_to_float(x[r * stride + i]);
      for (int h = 0; h < heads; ++h) {
        double* p = &want[r * stride + h * D];
        const double inv = rms_inv(p, D, 1e-6);
        for (int i = 0; i < D; ++i)
          p[i] = bf16_to_float(w[i]) * round_bf16(p[i] * inv);
      }
    }
    {
      SCOPED_TRACE(::testing::Message() << "D " << D);
      EXPECT_CLOSE(download<std::uint16_t>(dx, rows * stride), want, 1e-6, 8e-3);
    }
  }
}

TEST(gpu_decode_kernels, rope_rotates_half_pairs_at_each_rows_position) {
  KG_REQUIRE_GPU();
  for (const int D : {64, 128}) {
    const int rows = 3, heads = 3, stride = heads * D + 8;
    const std::vector<int> pos = {0, 7, 8191};
    const auto x = random_bf16(rows * stride, 1.0, 6);
    auto dx = upload(x), dp = upload(pos);
    KG_CUDA_CHECK(decode::launch_rope(bf(dx), rows, stride, heads, D, ip(dp), 1e6, nullptr));
    KG_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<double> want(rows * stride);
    for (int i = 0; i < rows * stride; ++i)
      want[i] = bf16_to_float(x[i]);
    for (int r = 0; r < rows; ++r)
      for (int h = 0; h < heads; ++h)
        for (int i = 0; i < D / 2; ++i) {
          const double a = pos[r] * std::pow(1e6, -2.0 * i / D);
          double* p = &want[r * stride + h * D];
          const double x1 = p[i], x2 = p[i + D / 2];
          p[i] = x1 * std::cos(a) - x2 * std::sin(a);
          p[i + D / 2] = x2 * std::cos(a) + x1 * std::sin(a);
        }
    {
      SCOPED_TRACE(::testing::Message() << "D " << D);
      EXPECT_CLOSE(download<std::uint16_t>(dx, rows * stride), want, 1e-5, 8e-3);
    }
  }
}

TEST(gpu_decode_kernels, kv_append_writes_each_rows_slot_and_position_only) {
  KG_REQUIRE_GPU();
  const int rows = 3, hk = 2, D = 64, max_ctx = 1030, slots_n = 6, stride = 3 * hk * D + 16;
  const std::vector<int> slots = {2, 0, 5}, pos = {0, 17, 1029};
  const auto src = random_bf16(rows * stride, 1.0, 7);
  const std::size_t cache_n = static_cast<std::size_t>(slots_n) * hk * max_ctx * D;
  auto ds = upload(src), dsl = upload(slots), dp = upload(pos);
  device_buffer kc(cache_n * 2), vc(cache_n * 2);
  KG_CUDA_CHECK(cudaMemset(kc.get(), 0, cache_n * 2));
  KG_CUDA_CHECK(cudaMemset(vc.get(), 0, cache_n * 2));
  KG_CUDA_CHECK(decode::launch_kv_append(bf(ds) + 16, bf(ds) + 16 + hk * D, stride, bf(kc), bf(vc),
                                         ip(dsl), ip(dp), rows, hk, D, max_ctx, nullptr));
  KG_CUDA_CHECK(cudaDeviceSynchronize());
  const auto k = download<std::uint16_t>(kc, cache_n), v = download<std::uint16_t>(vc, cache_n);
  std::vector<std::uint16_t> wk(cache_n, 0), wv(cache_n, 0);
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < hk; ++h)
      for (int d = 0; d < D; ++d) {
        const std::size_t at =
            ((static_cast<std::size_t>(slots[r]) * hk + h) * max_ctx + pos[r]) * D + d;
        wk[at] = src[r * stride + 16 + h * D + d];
        wv[at] = src[r * stride + 16 + hk * D + h * D + d];
      }
  EXPECT_TRUE(k == wk) << "K cache differs from the expected writes";
  EXPECT_TRUE(v == wv) << "V cache differs from the expected writes";
}

namespace {

void check_attention(int hq, int hk, int D, const std::vector<int>& lengths, int max_ctx) {
  const int rows = static_cast<int>(lengths.size()), slots_n = rows + 2;
  const int stride = (hq + 2 * hk) * D; // q inside a qkv row, as the engine lays it out
  std::vector<int> slots(rows);
  for (int r = 0; r < rows; ++r)
    slots[r] = (r * 2 + 1) % slots_n; // out of order, not the row index
  const std::size_t cache_n = static_cast<std::size_t>(slots_n) * hk * max_ctx * D;
  const auto q = random_bf16(rows * stride, 1.0, 8), k = random_bf16(cache_n, 1.0, 9),
             v = random_bf16(cache_n, 1.0, 10);
  auto dq = upload(q), dk = upload(k), dv = upload(v), dsl = upload(slots), dl = upload(lengths);
  device_buffer out(static_cast<std::size_t>(rows) * hq * D * 2),
      work(decode::attention_workspace_bytes(rows, hq, hk, D, max_ctx));
  std::vector<std::uint16_t> first;
  for (int run = 0; run < 2; ++run) {
    KG_CUDA_CHECK(decode::launch_attention(bf(dq), stride, bf(dk), bf(dv), ip(dsl), ip(dl), bf(out),
                                           work.get(), rows, hq, hk, D, max_ctx, nullptr));
    KG_CUDA_CHECK(cudaDeviceSynchronize());
    const auto got = download<std::uint16_t>(out, static_cast<std::size_t>(rows) * hq * D);
    if (run == 0) {
      first = got;
      continue;
    }
    EXPECT_TRUE(got == first) << "a second run gave other bits";
  }
  std::vector<double> want(static_cast<std::size_t>(rows) * hq * D);
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < hq; ++h) {
      const int g = h / (hq / hk);
      const std::size_t base = (static_cast<std::size_t>(slots[r]) * hk + g) * max_ctx * D;
      std::vector<double> s(lengths[r]);
      double mx = -1e300;
      for (int t = 0; t < lengths[r]; ++t) {
        double dot = 0;
        for (int d = 0; d < D; ++d)
          dot += bf16_to_float(q[r * stride + h * D + d]) * bf16_to_float(k[base + t * D + d]);
        s[t] = dot / std::sqrt(static_cast<double>(D));
        mx = std::max(mx, s[t]);
      }
      double sum = 0;
      for (auto& x : s)
        sum += (x = std::exp(x - mx));
      for (int d = 0; d < D; ++d) {
        double o = 0;
        for (int t = 0; t < lengths[r]; ++t)
          o += s[t] * bf16_to_float(v[base + t * D + d]);
        want[(static_cast<std::size_t>(r) * hq + h) * D + d] = o / sum;
      }
    }
  {
    SCOPED_TRACE(::testing::Message() << "hq " << hq << " hk " << hk << " D " << D);
    EXPECT_CLOSE(first, want, 2e-3, 1e-2);
  }
}

} // namespace

TEST(gpu_decode_kernels, splitkv_attention_matches_softmax_reference_and_repeats) {
  KG_REQUIRE_GPU();
  // Qwen3-4B's heads (group 4, D 128); lengths of 1 token, a chunk +- 1, several chunks.
  check_attention(32, 8, 128, {1, 255, 257, 1000}, 1100);
  // The tiny engine's (group 2, D 64), and group 8 / group 1.
  check_attention(4, 2, 64, {513, 2, 256}, 600);
  check_attention(8, 1, 128, {300}, 300);
  check_attention(3, 3, 64, {77, 1}, 128);
}

TEST(gpu_decode_kernels, silu_gate_gather_and_argmax) {
  KG_REQUIRE_GPU();
  {
    const int rows = 3, inter = 1001;
    const auto gu = random_bf16(rows * 2 * inter, 2.0, 11);
    auto dg = upload(gu);
    device_buffer out(rows * inter * 2);
    KG_CUDA_CHECK(decode::launch_silu_gate_mul(bf(dg), bf(out), rows, inter, nullptr));
    KG_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<double> want(rows * inter);
    for (int r = 0; r < rows; ++r)
      for (int i = 0; i < inter; ++i) {
        const double g = bf16_to_float(gu[r * 2 * inter + i]),
                     u = bf16_to_float(gu[r * 2 * inter + inter + i]);
        want[r * inter + i] = g / (1 + std::exp(-g)) * u;
      }
    EXPECT_CLOSE(download<std::uint16_t>(out, rows * inter), want, 1e-6, 8e-3);
  }
  {
    const int rows = 3, cols = 264, vocab = 100;
    const std::vector<int> tok = {5, 0, 99};
    const auto table = random_bf16(vocab * cols, 1.0, 12);
    auto dt = upload(table), dk = upload(tok);
    device_buffer out(rows * cols * 2);
    KG_CUDA_CHECK(decode::launch_embedding_gather(bf(dt), ip(dk), bf(out), rows, cols, nullptr));
    KG_CUDA_CHECK(cudaDeviceSynchronize());
    const auto got = download<std::uint16_t>(out, rows * cols);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c)
        ASSERT_EQ(got[r * cols + c], table[tok[r] * cols + c]) << "row " << r << " col " << c;
  }
  for (const int cols : {1001, 151936}) {
    const int rows = 3;
    auto x = random_bf16(static_cast<std::size_t>(rows) * cols, 1.0, 13);
    // Row 1: a tie for the maximum (the first index must win); row 2: the maximum at the end.
    x[cols + 17] = x[cols + cols - 5] = float_to_bf16(100.0f);
    x[2 * cols + cols - 1] = float_to_bf16(50.0f);
    std::vector<int> want(rows);
    for (int r = 0; r < rows; ++r) {
      int best = 0;
      for (int c = 1; c < cols; ++c)
        if (bf16_to_float(x[r * cols + c]) > bf16_to_float(x[r * cols + best])) best = c;
      want[r] = best;
    }
    auto dx = upload(x);
    device_buffer out(rows * sizeof(int));
    KG_CUDA_CHECK(decode::launch_argmax(bf(dx), ip(out), rows, cols, nullptr));
    KG_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_EQ(download<int>(out, rows), want) << "cols " << cols;
    EXPECT_EQ(want[1], 17);
  }
}

TEST(gpu_decode_kernels, seeded_fills_repeat_and_have_the_asked_moments) {
  KG_REQUIRE_GPU();
  const std::size_t n = 1 << 20;
  device_buffer a(n * 2), b(n * 2), c(n * 2);
  KG_CUDA_CHECK(decode::launch_fill_uniform(bf(a), n, 42, 3, 1.0f, 0.02f, nullptr));
  KG_CUDA_CHECK(decode::launch_fill_uniform(bf(b), n, 42, 3, 1.0f, 0.02f, nullptr));
  KG_CUDA_CHECK(decode::launch_fill_uniform(bf(c), n, 42, 4, 1.0f, 0.02f, nullptr));
  const auto ha = download<std::uint16_t>(a, n), hb = download<std::uint16_t>(b, n),
             hc = download<std::uint16_t>(c, n);
  EXPECT_TRUE(ha == hb) << "the same seed and stream gave other values";
  EXPECT_FALSE(ha == hc) << "two streams gave the same values";
  double s = 0, ss = 0;
  for (const auto x : ha) {
    const double f = bf16_to_float(x) - 1.0;
    s += f;
    ss += f * f;
  }
  EXPECT_NEAR(s / n, 0.0, 1e-3);
  EXPECT_NEAR(std::sqrt(ss / n), 0.02, 2e-3); // bf16 near 1 is coarse (2^-8): a loose sd check
}
TEST(gpu_decode_kernels, fused_prologue_is_bit_identical_to_the_separate_kernels) {
  KG_REQUIRE_GPU();
  for (const auto& [hq, hk, D] :
       {std::tuple{32, 8, 128}, std::tuple{4, 2, 64}, std::tuple{3, 1, 128}}) {
    SCOPED_TRACE(::testing::Message() << "hq " << hq << " hk " << hk << " D " << D);
    const int rows = 3, max_ctx = 700, slots_n = 5, stride = (hq + 2 * hk) * D;
    const std::vector<int> slots = {4, 0, 2}, pos = {0, 311, 699};
    const auto qkv = random_bf16(rows * stride, 1.5, 16), qw = random_bf16(D, 0.05, 17, 1.0),
               kw = random_bf16(D, 0.05, 18, 1.0);
    const std::size_t cache_n = static_cast<std::size_t>(slots_n) * hk * max_ctx * D;
    auto a = upload(qkv), b = upload(qkv), dqw = upload(qw), dkw = upload(kw), dsl = upload(slots),
         dp = upload(pos);
    device_buffer kca(cache_n * 2), vca(cache_n * 2), kcb(cache_n * 2), vcb(cache_n * 2);
    for (auto* c : {&kca, &vca, &kcb, &vcb})
      KG_CUDA_CHECK(cudaMemset(c->get(), 0, cache_n * 2));
    KG_CUDA_CHECK(decode::launch_head_rmsnorm(bf(a), rows, stride, hq, D, bf(dqw), 1e-6f, nullptr));
    KG_CUDA_CHECK(
        decode::launch_head_rmsnorm(bf(a) + hq * D, rows, stride, hk, D, bf(dkw), 1e-6f, nullptr));
    KG_CUDA_CHECK(decode::launch_rope(bf(a), rows, stride, hq + hk, D, ip(dp), 1e6, nullptr));
    KG_CUDA_CHECK(decode::launch_kv_append(bf(a) + hq * D, bf(a) + (hq + hk) * D, stride, bf(kca),
                                           bf(vca), ip(dsl), ip(dp), rows, hk, D, max_ctx,
                                           nullptr));
    KG_CUDA_CHECK(decode::launch_qk_norm_rope_append(bf(b), rows, stride, hq, hk, D, bf(dqw),
                                                     bf(dkw), 1e-6f, ip(dp), 1e6, ip(dsl), bf(kcb),
                                                     bf(vcb), max_ctx, nullptr));
    KG_CUDA_CHECK(cudaDeviceSynchronize());
    const auto ra = download<std::uint16_t>(a, rows * stride),
               rb = download<std::uint16_t>(b, rows * stride);
    std::size_t diff = 0, first = ra.size();
    for (std::size_t i = 0; i < ra.size(); ++i)
      if (ra[i] != rb[i] && diff++ == 0) first = i;
    EXPECT_EQ(diff, 0u) << diff << " qkv elements differ, the first at " << first;
    EXPECT_TRUE(download<std::uint16_t>(kca, cache_n) == download<std::uint16_t>(kcb, cache_n))
        << "K cache differs";
    EXPECT_TRUE(download<std::uint16_t>(vca, cache_n) == download<std::uint16_t>(vcb, cache_n))
        << "V cache differs";
  }
}
