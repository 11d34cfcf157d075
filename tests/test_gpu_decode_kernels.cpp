// The decode engine's kernels (kernels/decode) against host references in double, on odd shapes
// (rows that fill no block, lengths one past a chunk, slots out of order), and each run twice to
// check the bits repeat. Failures print the worst element so an H200 log says what broke.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "bf16_host.h"
#include "gpu/cuda_check.h"
#include "gpu/device_buffer.h"
#include "gpu_test_support.h"
#include "kernels/decode/decode_kernels.h"

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

// Uniform bf16 of unit variance from a counter hash: the attention caches run to 10^8 elements,
// where std::normal_distribution would take seconds.
std::vector<std::uint16_t> hash_bf16(std::size_t n, std::uint64_t seed) {
  std::vector<std::uint16_t> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t z = seed * 0x9e3779b97f4a7c15ull + i;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const double u = static_cast<double>(z >> 11) / 9007199254740992.0; // [0, 1)
    v[i] = float_to_bf16(static_cast<float>((2 * u - 1) * std::sqrt(3.0)));
  }
  return v;
}

constexpr std::uint16_t bf16_nan = 0x7fc0;

// One attention problem: q inside qkv rows as the engine lays them out, each row's cache slot
// out of order, and every cache position a row may not read (past its length, unused slots)
// NaN, so a read past the length shows in the output. `want` is the softmax in double.
struct attention_problem {
  int hq, hk, D, max_ctx, rows, slots_n, stride;
  std::vector<int> lengths, slots;
  std::vector<std::uint16_t> q, k, v;
  std::vector<double> want;

  attention_problem(int hq_, int hk_, int D_, std::vector<int> lengths_, int max_ctx_)
      : hq(hq_), hk(hk_), D(D_), max_ctx(max_ctx_), rows(static_cast<int>(lengths_.size())),
        slots_n(rows + 2), stride((hq_ + 2 * hk_) * D_), lengths(std::move(lengths_)) {
    for (int r = 0; r < rows; ++r)
      slots.push_back(slots_n - 1 - r); // not the row index
    const std::size_t cache_n = static_cast<std::size_t>(slots_n) * hk * max_ctx * D;
    q = random_bf16(static_cast<std::size_t>(rows) * stride, 1.0, 8);
    k = hash_bf16(cache_n, 9);
    v = hash_bf16(cache_n, 10);
    std::vector<int> readable(slots_n, 0);
    for (int r = 0; r < rows; ++r)
      readable[slots[r]] = lengths[r];
    for (int sl = 0; sl < slots_n; ++sl)
      for (int h = 0; h < hk; ++h) {
        const std::size_t at =
            ((static_cast<std::size_t>(sl) * hk + h) * max_ctx + readable[sl]) * D;
        const std::size_t end = (static_cast<std::size_t>(sl) * hk + h + 1) * max_ctx * D;
        std::fill(k.begin() + at, k.begin() + end, bf16_nan);
        std::fill(v.begin() + at, v.begin() + end, bf16_nan);
      }
    want.resize(static_cast<std::size_t>(rows) * hq * D);
    const std::vector<float> kf = to_float(k), vf = to_float(v);
    for (int r = 0; r < rows; ++r)
      for (int h = 0; h < hq; ++h) {
        const int g = h / (hq / hk);
        const std::size_t base = (static_cast<std::size_t>(slots[r]) * hk + g) * max_ctx * D;
        std::vector<double> qd(D), s(lengths[r]), o(D, 0.0);
        for (int d = 0; d < D; ++d)
          qd[d] = bf16_to_float(q[r * stride + h * D + d]);
        double mx = -1e300;
        for (int t = 0; t < lengths[r]; ++t) {
          double dot = 0;
          for (int d = 0; d < D; ++d)
            dot += qd[d] * kf[base + static_cast<std::size_t>(t) * D + d];
          s[t] = dot / std::sqrt(static_cast<double>(D));
          mx = std::max(mx, s[t]);
        }
        double sum = 0;
        for (int t = 0; t < lengths[r]; ++t) {
          const double e = std::exp(s[t] - mx);
          sum += e;
          for (int d = 0; d < D; ++d)
            o[d] += e * vf[base + static_cast<std::size_t>(t) * D + d];
        }
        for (int d = 0; d < D; ++d)
          want[(static_cast<std::size_t>(r) * hq + h) * D + d] = o[d] / sum;
      }
  }
};

// The problem on the device; run() launches with a configuration and returns the output bits.
// The workspace and the output are filled with NaN before every launch, so a stage-2 read of a
// chunk stage 1 did not write, or an output it did not write, shows.
struct attention_device {
  const attention_problem& p;
  device_buffer dk, dv;
  attention_device(const attention_problem& p_) : p(p_), dk(upload(p_.k)), dv(upload(p_.v)) {}

  // Rows in the order `order` (row i of this launch is the problem's row order[i]). With
  // `counters` (zeroed once, then reused: each launch must leave them zero, which is checked) a
  // configuration with merge_in_stage1 merges in stage 1; without, stage 2 merges.
  std::vector<std::uint16_t> run(const decode::attention_config& c, const std::vector<int>& order,
                                 bool counters = true) {
    const int rows = static_cast<int>(order.size());
    std::vector<std::uint16_t> q(static_cast<std::size_t>(rows) * p.stride);
    std::vector<int> lengths(rows), slots(rows);
    for (int i = 0; i < rows; ++i) {
      std::copy_n(p.q.begin() + static_cast<std::size_t>(order[i]) * p.stride, p.stride,
                  q.begin() + static_cast<std::size_t>(i) * p.stride);
      lengths[i] = p.lengths[order[i]];
      slots[i] = p.slots[order[i]];
    }
    auto dq = upload(q), dl = upload(lengths), dsl = upload(slots);
    const std::size_t out_n = static_cast<std::size_t>(rows) * p.hq * p.D;
    const std::size_t work_bytes =
        decode::attention_workspace_bytes(c, rows, p.hq, p.hk, p.D, p.max_ctx);
    EXPECT_GT(work_bytes, 0u);
    device_buffer out(out_n * 2), work(work_bytes);
    KG_CUDA_CHECK(cudaMemset(out.get(), 0xff, out_n * 2));
    KG_CUDA_CHECK(cudaMemset(work.get(), 0xff, work_bytes));
    decode::attention_args a{bf(dq),     p.stride, bf(dk), bf(dv), ip(dsl), ip(dl),   bf(out),
                             work.get(), rows,     p.hq,   p.hk,   p.D,     p.max_ctx};
    const std::size_t counters_n = static_cast<std::size_t>(rows) * p.hk;
    if (counters) {
      if (counter_buf.size() < counters_n * sizeof(unsigned)) {
        counter_buf = device_buffer(counters_n * sizeof(unsigned));
        KG_CUDA_CHECK(cudaMemset(counter_buf.get(), 0, counter_buf.size()));
      }
      a.counters = static_cast<unsigned*>(counter_buf.get());
    }
    KG_CUDA_CHECK(decode::launch_attention_with(c, a, nullptr));
    KG_CUDA_CHECK(cudaDeviceSynchronize());
    if (counters) {
      EXPECT_EQ(download<unsigned>(counter_buf, counters_n), std::vector<unsigned>(counters_n, 0u))
          << "a launch left its merge counters nonzero";
    }
    return download<std::uint16_t>(out, out_n);
  }
  device_buffer counter_buf;
};

// Every configuration of the sweep (the default first): close to the reference, the same bits
// on a second run, and each row's bits unchanged when the batch is given in reverse order.
void check_attention(const attention_problem& p) {
  attention_device dev(p);
  std::vector<int> order(p.rows), reversed(p.rows);
  for (int r = 0; r < p.rows; ++r) {
    order[r] = r;
    reversed[r] = p.rows - 1 - r;
  }
  const std::size_t row_n = static_cast<std::size_t>(p.hq) * p.D;
  for (const auto& [name, c] : decode::attention_sweep_configs) {
    SCOPED_TRACE(::testing::Message() << "config " << name << ", hq " << p.hq << " hk " << p.hk
                                      << " D " << p.D << " max_ctx " << p.max_ctx);
    const auto first = dev.run(c, order);
    EXPECT_CLOSE(first, p.want, 2e-3, 1e-2);
    EXPECT_TRUE(dev.run(c, order) == first) << "a second run gave other bits";
    const auto back = dev.run(c, reversed);
    for (int r = 0; r < p.rows; ++r)
      EXPECT_TRUE(std::equal(first.begin() + r * row_n, first.begin() + (r + 1) * row_n,
                             back.begin() + (p.rows - 1 - r) * row_n))
          << "row " << r << " (length " << p.lengths[r]
          << ") gave other bits at another place in the batch";
  }
  // launch_attention is pick_attention_config(rows).
  const auto via_default = dev.run(decode::pick_attention_config(p.rows), order);
  std::vector<int> lengths = p.lengths, slots = p.slots;
  auto dq = upload(p.q), dl = upload(lengths), dsl = upload(slots);
  const std::size_t out_n = static_cast<std::size_t>(p.rows) * row_n;
  device_buffer out(out_n * 2),
      work(decode::attention_workspace_bytes(p.rows, p.hq, p.hk, p.D, p.max_ctx));
  KG_CUDA_CHECK(decode::launch_attention({bf(dq), p.stride, bf(dev.dk), bf(dev.dv), ip(dsl), ip(dl),
                                          bf(out), work.get(), p.rows, p.hq, p.hk, p.D, p.max_ctx},
                                         nullptr));
  KG_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(download<std::uint16_t>(out, out_n) == via_default)
      << "launch_attention differs from launch_attention_with(pick_attention_config(rows))";
}

// f(problem, its device copy, its rows in order, configuration) for every problem and every
// configuration of the sweep that `pick` takes.
template <class Problems, class Pick, class F>
void for_each_swept(const Problems& problems, Pick pick, F f) {
  for (const auto& p : problems) {
    attention_device dev(p);
    std::vector<int> order(p.rows);
    std::iota(order.begin(), order.end(), 0);
    for (const auto& [name, c] : decode::attention_sweep_configs) {
      if (!pick(c)) continue;
      SCOPED_TRACE(::testing::Message()
                   << "config " << name << ", hq " << p.hq << " hk " << p.hk << " D " << p.D);
      f(p, dev, order, c);
    }
  }
}

} // namespace

TEST(gpu_decode_kernels, splitkv_attention_matches_softmax_reference_and_repeats) {
  KG_REQUIRE_GPU();
  // Qwen3-4B's heads (group 4, D 128), one batch of lengths on both sides of tile (32, 64) and
  // chunk boundaries (64 tokens at 2048, 256 at 8192 by default), up to the cache's end.
  check_attention(
      attention_problem(32, 8, 128, {1, 63, 64, 65, 2047, 2048, 2049, 8191, 8192}, 8192));
  // A cache much longer than the rows: chunks of 512 at 16384 tokens, blocks past short rows.
  check_attention(attention_problem(32, 8, 128, {16384, 2049, 1}, 16384));
  // The tiny engine's (group 2, D 64), and group 8 / group 1 at both head sizes.
  check_attention(attention_problem(4, 2, 64, {513, 2, 256, 65}, 600));
  check_attention(attention_problem(8, 1, 128, {300}, 300));
  check_attention(attention_problem(16, 2, 64, {1000, 33}, 1024));
  check_attention(attention_problem(3, 3, 64, {77, 1}, 128));
}

// Each configuration of the sweep that merges in stage 1 gives, launch after launch on the same
// counters, the bits of the same configuration merging in stage 2; rows of one chunk (whose only
// block is the last), of several, and blocks past a row's end in one batch.
TEST(gpu_decode_kernels, merge_in_stage1_gives_stage_2s_bits_launch_after_launch) {
  KG_REQUIRE_GPU();
  const attention_problem problems[] = {
      attention_problem(32, 8, 128, {1, 64, 65, 127, 128, 129, 2047, 2048, 8191, 8192}, 8192),
      attention_problem(16, 2, 64, {1000, 33, 1}, 1024),
      attention_problem(16, 8, 64, {777, 4}, 800)};
  int merging = 0;
  for_each_swept(
      problems, [](const decode::attention_config& c) { return c.merge_in_stage1; },
      [&](const attention_problem& p, attention_device& dev, const std::vector<int>& order,
          const decode::attention_config& c) {
        merging += decode::attention_merges_in_stage1(c, p.hq, p.hk, p.D, p.max_ctx);
        const auto staged = dev.run(c, order, false);
        for (int launch = 0; launch < 3; ++launch)
          EXPECT_TRUE(dev.run(c, order) == staged)
              << "launch " << launch << " merged in stage 1 to other bits than stage 2";
      });
  EXPECT_GE(merging, 8) << "the sweep's merging configurations fell back to stage 2";
}

// Stage 1 with 8 warps gives its 4-warp twin's bits (each sum keeps its terms and their order),
// stage 2 merging or merged in stage 1: Qwen3-4B's heads at lengths around tiles and chunks, and
// groups 2 and 8 at both head sizes.
TEST(gpu_decode_kernels, eight_warps_give_the_four_warp_bits) {
  KG_REQUIRE_GPU();
  const attention_problem problems[] = {
      attention_problem(32, 8, 128, {1, 63, 64, 65, 127, 129, 2047, 2048, 8191, 8192}, 8192),
      attention_problem(16, 2, 64, {1000, 33, 1}, 1024),
      attention_problem(16, 8, 64, {777, 4}, 800),
      attention_problem(64, 8, 128, {300, 5000}, 5000)};
  int compared = 0;
  for_each_swept(
      problems, [](const decode::attention_config& c) { return c.warps == 8; },
      [&](const attention_problem&, attention_device& dev, const std::vector<int>& order,
          const decode::attention_config& c) {
        decode::attention_config four = c;
        four.warps = 4;
        for (const bool counters : {false, true}) {
          EXPECT_TRUE(dev.run(c, order, counters) == dev.run(four, order, counters))
              << (counters ? "with" : "without") << " merge counters";
          ++compared;
        }
      });
  EXPECT_GE(compared, 16); // 4 problems x 2 configurations x 2
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

TEST(gpu_decode_kernels, fused_attention_is_bit_identical_to_prologue_then_attention) {
  KG_REQUIRE_GPU();
  // Lengths whose new token (position len - 1) lands in a chunk's first tile (loaded in the
  // ring's fill), in a later tile (loaded in the loop), alone in its chunk, and at the cache's end.
  struct shape {
    int hq, hk, D, max_ctx;
    std::vector<int> lengths;
  };
  const shape shapes[] = {{32, 8, 128, 8192, {1, 64, 65, 1970, 2048, 2049, 8192}},
                          {4, 2, 64, 600, {513, 2, 256}},
                          {8, 1, 128, 300, {300, 97}}};
  for (const auto& sh : shapes) {
    const int rows = static_cast<int>(sh.lengths.size()), slots_n = rows + 1;
    const int stride = (sh.hq + 2 * sh.hk) * sh.D;
    std::vector<int> slots, positions;
    for (int r = 0; r < rows; ++r) {
      slots.push_back(slots_n - 1 - r);
      positions.push_back(sh.lengths[r] - 1);
    }
    const std::size_t cache_n = static_cast<std::size_t>(slots_n) * sh.hk * sh.max_ctx * sh.D;
    const auto qkv = random_bf16(static_cast<std::size_t>(rows) * stride, 1.5, 21);
    const auto qw = random_bf16(sh.D, 0.05, 22, 1.0), kw = random_bf16(sh.D, 0.05, 23, 1.0);
    const auto k0 = hash_bf16(cache_n, 24), v0 = hash_bf16(cache_n, 25);
    auto dqw = upload(qw), dkw = upload(kw), dsl = upload(slots), dp = upload(positions),
         dl = upload(sh.lengths);
    const std::size_t out_n = static_cast<std::size_t>(rows) * sh.hq * sh.D;
    std::vector<decode::attention_config> configs;
    for (const auto& [name, c] : decode::attention_sweep_configs)
      configs.push_back(c);
    configs.push_back(decode::pick_attention_config(rows));
    for (std::size_t ci = 0; ci < configs.size(); ++ci) {
      const auto& c = configs[ci];
      SCOPED_TRACE(::testing::Message() << "hq " << sh.hq << " D " << sh.D << " config " << ci);
      const std::size_t work_bytes =
          decode::attention_workspace_bytes(c, rows, sh.hq, sh.hk, sh.D, sh.max_ctx);
      // a: the prologue kernel, then the attention; b: fused.
      auto qa = upload(qkv), qb = upload(qkv), ka = upload(k0), va = upload(v0), kb = upload(k0),
           vb = upload(v0);
      device_buffer oa(out_n * 2), ob(out_n * 2), wa(work_bytes), wb(work_bytes);
      for (auto* b : {&oa, &ob})
        KG_CUDA_CHECK(cudaMemset(b->get(), 0xff, out_n * 2));
      KG_CUDA_CHECK(decode::launch_qk_norm_rope_append(
          bf(qa), rows, stride, sh.hq, sh.hk, sh.D, bf(dqw), bf(dkw), 1e-6f, ip(dp), 1e6, ip(dsl),
          bf(ka), bf(va), sh.max_ctx, nullptr));
      KG_CUDA_CHECK(
          decode::launch_attention_with(c,
                                        {bf(qa), stride, bf(ka), bf(va), ip(dsl), ip(dl), bf(oa),
                                         wa.get(), rows, sh.hq, sh.hk, sh.D, sh.max_ctx},
                                        nullptr));
      // The fused launch with merge counters (a configuration with merge_in_stage1 then
      // merges in stage 1), the separate one without (stage 2 merges).
      device_buffer counters(static_cast<std::size_t>(rows) * sh.hk * sizeof(unsigned));
      KG_CUDA_CHECK(cudaMemset(counters.get(), 0, counters.size()));
      decode::attention_args fused{bf(qb),   stride, bf(kb), bf(vb), ip(dsl), ip(dl),    bf(ob),
                                   wb.get(), rows,   sh.hq,  sh.hk,  sh.D,    sh.max_ctx};
      fused.counters = static_cast<unsigned*>(counters.get());
      const decode::attention_prologue prologue{bf(dqw), bf(dkw), 1e-6f, 1e6};
      if (ci + 1 < configs.size())
        KG_CUDA_CHECK(decode::launch_attention_fused_with(c, fused, prologue, nullptr));
      else // the engine's entry point: pick_attention_config(rows)
        KG_CUDA_CHECK(decode::launch_attention_fused(fused, prologue, nullptr));
      KG_CUDA_CHECK(cudaDeviceSynchronize());
      const auto ra = download<std::uint16_t>(oa, out_n), rb = download<std::uint16_t>(ob, out_n);
      std::size_t diff = 0, first = out_n;
      for (std::size_t i = 0; i < out_n; ++i)
        if (ra[i] != rb[i] && diff++ == 0) first = i;
      EXPECT_EQ(diff, 0u) << diff << " outputs differ, the first at " << first << " (row "
                          << first / (sh.hq * sh.D) << ")";
      EXPECT_TRUE(download<std::uint16_t>(ka, cache_n) == download<std::uint16_t>(kb, cache_n))
          << "K cache differs";
      EXPECT_TRUE(download<std::uint16_t>(va, cache_n) == download<std::uint16_t>(vb, cache_n))
          << "V cache differs";
      EXPECT_TRUE(download<std::uint16_t>(qb, qkv.size()) == qkv) << "the fused launch wrote qkv";
      const std::size_t counters_n = static_cast<std::size_t>(rows) * sh.hk;
      EXPECT_EQ(download<unsigned>(counters, counters_n), std::vector<unsigned>(counters_n, 0u))
          << "the fused launch left its merge counters nonzero";
    }
  }
}
