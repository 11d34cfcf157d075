// The chunked-prefill attention kernel (kernels/decode/attention_prefill.h) against a host
// softmax in double computed from the same bf16 inputs, on chunks that fill no q tile, at and
// past tile boundaries, from position 0 and deep into the context. The sequence's cache block
// sits between blocks of NaN, its positions from p0 + n on are NaN and each q row's k and v heads
// are NaN: a read of any of them shows in the output. The output has sentinel rows on both sides.
// Large chunks check a deterministic sample of (row, head) pairs (every head, the first and last
// rows whole) so the reference stays within a second; every output element is checked to be
// finite and inside the range of V.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "bf16_host.h"
#include "gpu/cuda_check.h"
#include "gpu/device_buffer.h"
#include "gpu_test_support.h"
#include "kernels/decode/attention_prefill.h"

using namespace kg;
using namespace kg::test;

namespace {

constexpr std::uint16_t bf16_nan = 0x7fc0;
constexpr std::uint16_t sentinel = 0x5a5a; // what cudaMemset(0x5a) leaves: finite, ~1.5e16

// Uniform of unit variance (+-sqrt(3)) from a counter hash of (seed, i), times scale, in bf16.
std::uint16_t hash_bf16(std::uint64_t seed, std::uint64_t i, double scale) {
  std::uint64_t z = seed * 0x9e3779b97f4a7c15ull + i;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  const double u = static_cast<double>(z >> 11) / 9007199254740992.0; // [0, 1)
  return float_to_bf16(static_cast<float>((2 * u - 1) * std::sqrt(3.0) * scale));
}

__nv_bfloat16* bf(const device_buffer& b) {
  return static_cast<__nv_bfloat16*>(b.get());
}

device_buffer upload(const std::vector<std::uint16_t>& v) {
  device_buffer b(v.size() * 2);
  KG_CUDA_CHECK(cudaMemcpy(b.get(), v.data(), v.size() * 2, cudaMemcpyHostToDevice));
  return b;
}

std::vector<std::uint16_t> download(const device_buffer& b) {
  std::vector<std::uint16_t> v(b.size() / 2);
  KG_CUDA_CHECK(cudaMemcpy(v.data(), b.get(), b.size(), cudaMemcpyDeviceToHost));
  return v;
}

// f(i) for i in [0, count), over the host's cores.
template <typename F>
void parallel_for(std::size_t count, F f) {
  const unsigned workers = std::max(1u, std::min(32u, std::thread::hardware_concurrency()));
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < workers; ++w)
    pool.emplace_back([&] {
      for (std::size_t i = next++; i < count; i = next++)
        f(i);
    });
  for (auto& t : pool)
    t.join();
}

struct prefill_case {
  int hq, hk, D, n, p0;
  double k_scale = 1, v_scale = 1;
  int kv_start = -1; // -1: the block is slot 1 of three (kv_start = kv_capacity)
};

std::ostream& operator<<(std::ostream& o, const prefill_case& c) {
  return o << "hq " << c.hq << " hk " << c.hk << " D " << c.D << " n " << c.n << " p0 " << c.p0
           << " k_scale " << c.k_scale << " v_scale " << c.v_scale << " kv_start " << c.kv_start;
}

// One case on the host: the caches (NaN around and past the block's valid positions), the qkv
// rows (NaN k and v heads) and, for the checked (row, head) pairs, the reference in double.
struct prefill_problem {
  prefill_case c;
  int cap, kv_start, stride, group;
  std::vector<std::uint16_t> q, k, v;
  std::vector<float> kf, vf; // the block's valid positions [hk][p0 + n][D], as float
  double v_max = 0;

  explicit prefill_problem(const prefill_case& c_)
      : c(c_), cap(c_.p0 + c_.n + 24), kv_start(c_.kv_start < 0 ? cap : c_.kv_start),
        stride((c_.hq + 2 * c_.hk) * c_.D), group(c_.hq / c_.hk) {
    const int len = c.p0 + c.n;
    const std::size_t block = static_cast<std::size_t>(kv_start) * c.hk * c.D;
    const std::size_t total = block + 2 * static_cast<std::size_t>(c.hk) * cap * c.D;
    k.assign(total, bf16_nan);
    v.assign(total, bf16_nan);
    kf.resize(static_cast<std::size_t>(c.hk) * len * c.D);
    vf.resize(kf.size());
    for (int g = 0; g < c.hk; ++g)
      for (int pos = 0; pos < len; ++pos)
        for (int d = 0; d < c.D; ++d) {
          const std::uint64_t id = (static_cast<std::uint64_t>(g) * 100003 + pos) * c.D + d;
          const std::size_t at =
              block + (static_cast<std::size_t>(g) * cap + pos) * c.D + d; // the header's formula
          k[at] = hash_bf16(1, id, c.k_scale);
          v[at] = hash_bf16(2, id, c.v_scale);
          const std::size_t f = (static_cast<std::size_t>(g) * len + pos) * c.D + d;
          kf[f] = bf16_to_float(k[at]);
          vf[f] = bf16_to_float(v[at]);
          v_max = std::max(v_max, std::fabs(static_cast<double>(vf[f])));
        }
    q.assign(static_cast<std::size_t>(c.n) * stride, bf16_nan);
    for (int r = 0; r < c.n; ++r)
      for (int i = 0; i < c.hq * c.D; ++i)
        q[static_cast<std::size_t>(r) * stride + i] =
            hash_bf16(3, static_cast<std::uint64_t>(r + c.p0) * c.hq * c.D + i, 1.0);
  }

  // softmax(q . K[0..p0 + r] / sqrt(D)) V for q head h of row r, in double.
  std::vector<double> reference(int r, int h) const {
    const int len = c.p0 + c.n, keys = c.p0 + r + 1, g = h / group;
    const float* kg = &kf[static_cast<std::size_t>(g) * len * c.D];
    const float* vg = &vf[static_cast<std::size_t>(g) * len * c.D];
    std::vector<double> qd(c.D), s(keys), o(c.D, 0.0);
    for (int d = 0; d < c.D; ++d)
      qd[d] = bf16_to_float(q[static_cast<std::size_t>(r) * stride + h * c.D + d]);
    double mx = -1e300;
    for (int t = 0; t < keys; ++t) {
      double dot = 0;
      for (int d = 0; d < c.D; ++d)
        dot += qd[d] * kg[static_cast<std::size_t>(t) * c.D + d];
      s[t] = dot / std::sqrt(static_cast<double>(c.D));
      mx = std::max(mx, s[t]);
    }
    double sum = 0;
    for (int t = 0; t < keys; ++t) {
      const double e = std::exp(s[t] - mx);
      sum += e;
      for (int d = 0; d < c.D; ++d)
        o[d] += e * vg[static_cast<std::size_t>(t) * c.D + d];
    }
    for (auto& x : o)
      x /= sum;
    return o;
  }

  // The (row, head) pairs checked against the reference: all of them while the reference costs
  // under `budget` multiply-adds, else rows 0 and n - 1 whole and a diagonal sample that visits
  // every head and spreads over the rows.
  std::vector<std::pair<int, int>> checked_pairs(double budget = 1.5e8) const {
    double all = 0;
    for (int r = 0; r < c.n; ++r)
      all += static_cast<double>(c.p0 + r + 1) * c.hq * c.D * 2;
    const int every = std::max(1, static_cast<int>(std::ceil(all / budget)));
    std::vector<std::pair<int, int>> pairs;
    for (int r = 0; r < c.n; ++r)
      for (int h = 0; h < c.hq; ++h)
        if ((r + h) % every == 0 || r == 0 || r == c.n - 1) pairs.emplace_back(r, h);
    return pairs;
  }
};

// Runs the kernel on the problem: the output buffer has a sentinel row before and two after the
// n rows. Returns every bit of it.
std::vector<std::uint16_t> run_prefill(const prefill_problem& p) {
  const auto& c = p.c;
  auto dq = upload(p.q), dk = upload(p.k), dv = upload(p.v);
  const std::size_t row = static_cast<std::size_t>(c.hq) * c.D;
  device_buffer out((c.n + 3) * row * 2);
  KG_CUDA_CHECK(cudaMemset(out.get(), 0x5a, out.size()));
  decode::prefill_attention_args a;
  a.q = bf(dq);
  a.q_row_stride = p.stride;
  a.k_cache = bf(dk);
  a.v_cache = bf(dv);
  a.kv_start = p.kv_start;
  a.kv_capacity = p.cap;
  a.p0 = c.p0;
  a.n = c.n;
  a.out = bf(out) + row;
  a.q_heads = c.hq;
  a.kv_heads = c.hk;
  a.head_dim = c.D;
  KG_CUDA_CHECK(decode::launch_prefill_attention(a, nullptr));
  KG_CUDA_CHECK(cudaDeviceSynchronize());
  return download(out);
}

void check_prefill(const prefill_case& pc) {
  SCOPED_TRACE(::testing::Message() << pc);
  const prefill_problem p(pc);
  const auto& c = p.c;
  const auto got = run_prefill(p);
  const std::size_t row = static_cast<std::size_t>(c.hq) * c.D;
  // The rows around the output are untouched.
  std::size_t touched = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if ((i < row || i >= (c.n + 1) * row) && got[i] != sentinel) ++touched;
  EXPECT_EQ(touched, 0u) << "elements written outside the n output rows";
  // Every output is finite and a convex combination of V's values.
  std::size_t wild = 0, first_wild = 0;
  for (std::size_t i = row; i < (c.n + 1) * row; ++i) {
    const double x = bf16_to_float(got[i]);
    if (!std::isfinite(x) || std::fabs(x) > p.v_max * (1 + 1.0 / 128)) {
      if (wild++ == 0) first_wild = i - row;
    }
  }
  EXPECT_EQ(wild, 0u) << "non-finite or out-of-range outputs; first at row " << first_wild / row
                      << " head " << first_wild % row / c.D << " dim " << first_wild % c.D;
  // The sampled pairs against the reference: |got - want| <= 2^-7 max|want| + 1e-3 per (row,
  // head): the output's bf16 rounding and P's.
  const auto pairs = p.checked_pairs();
  std::vector<double> excess(pairs.size()), err(pairs.size()), scale(pairs.size());
  parallel_for(pairs.size(), [&](std::size_t i) {
    const auto [r, h] = pairs[i];
    const auto want = p.reference(r, h);
    double mx = 0, worst = 0, over = -1;
    for (double w : want)
      mx = std::max(mx, std::fabs(w));
    for (int d = 0; d < c.D; ++d) {
      const double g = bf16_to_float(got[(r + 1) * row + h * c.D + d]), e = std::fabs(g - want[d]);
      worst = std::isnan(e) ? e : std::max(worst, e);
      over = std::max(over, std::isnan(e) ? 1.0 : e - (mx / 128 + 1e-3));
    }
    excess[i] = over;
    err[i] = worst;
    scale[i] = mx;
  });
  std::size_t bad = 0, worst_at = 0;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    if (excess[i] > 0) ++bad;
    if (excess[i] > excess[worst_at]) worst_at = i;
  }
  EXPECT_EQ(bad, 0u) << bad << " of " << pairs.size()
                     << " (row, head) pairs beyond tolerance; worst "
                     << "row " << pairs[worst_at].first << " head " << pairs[worst_at].second
                     << ": max error " << err[worst_at] << " vs max |want| " << scale[worst_at];
  // The same bits again.
  EXPECT_TRUE(run_prefill(p) == got) << "a second run gave other bits";
}

} // namespace

TEST(gpu_prefill_attention, qwen3_4b_heads_match_fp64_reference) {
  KG_REQUIRE_GPU();
  // head_dim 128, 32 q / 8 kv heads: chunks of 1 row, a partial tile, one tile, two tiles and a
  // row, eight tiles; from the sequence's start, a few tokens in (the diagonal off the key tiles'
  // grid) and deep into the context.
  for (const int n : {1, 37, 64, 130, 512})
    for (const int p0 : {0, 5, 1000, 3000})
      check_prefill({32, 8, 128, n, p0});
}

TEST(gpu_prefill_attention, other_groups_and_head_dims_match_fp64_reference) {
  KG_REQUIRE_GPU();
  // head_dim 64, 4 q / 2 kv heads (group 2).
  for (const int n : {1, 37, 64, 130, 512})
    for (const int p0 : {0, 5, 1000, 3000})
      check_prefill({4, 2, 64, n, p0});
  // Group 1 and group 8 at both head sizes.
  check_prefill({4, 4, 128, 130, 1000});
  check_prefill({3, 3, 64, 37, 5});
  check_prefill({16, 2, 128, 130, 3000});
  check_prefill({8, 1, 64, 512, 5});
  // Peaked softmax (K scaled: scores of sd 3, the running maximum moves often) and a large V.
  check_prefill({32, 8, 128, 130, 1000, 3.0, 8.0});
  check_prefill({4, 2, 64, 64, 37, 3.0, 0.25});
  // A block that starts at no multiple of the capacity (kv_start 3).
  check_prefill({8, 2, 128, 100, 60, 1, 1, 3});
}

TEST(gpu_prefill_attention, rejects_unsupported_shapes) {
  KG_REQUIRE_GPU();
  const int hq = 4, hk = 2, D = 64, cap = 16;
  device_buffer q(8 * hq * D * 2), kc(2 * hk * cap * D * 2), vc(2 * hk * cap * D * 2),
      out(8 * hq * D * 2);
  KG_CUDA_CHECK(cudaMemset(q.get(), 0, q.size()));
  KG_CUDA_CHECK(cudaMemset(kc.get(), 0, kc.size()));
  KG_CUDA_CHECK(cudaMemset(vc.get(), 0, vc.size()));
  decode::prefill_attention_args ok;
  ok.q = bf(q);
  ok.q_row_stride = hq * D;
  ok.k_cache = bf(kc);
  ok.v_cache = bf(vc);
  ok.kv_start = cap;
  ok.kv_capacity = cap;
  ok.p0 = 8;
  ok.n = 8;
  ok.out = bf(out);
  ok.q_heads = hq;
  ok.kv_heads = hk;
  ok.head_dim = D;
  EXPECT_EQ(decode::launch_prefill_attention(ok, nullptr), cudaSuccess);
  KG_CUDA_CHECK(cudaDeviceSynchronize());
  const auto expect_invalid = [&](const char* what, auto change) {
    decode::prefill_attention_args a = ok;
    change(a);
    EXPECT_EQ(decode::launch_prefill_attention(a, nullptr), cudaErrorInvalidValue) << what;
  };
  expect_invalid("head_dim 96", [](auto& a) { a.head_dim = 96; });
  expect_invalid("head_dim 256", [](auto& a) { a.head_dim = 256; });
  expect_invalid("q_heads not a multiple of kv_heads", [](auto& a) { a.q_heads = 3; });
  expect_invalid("kv_heads 0", [](auto& a) { a.kv_heads = 0; });
  expect_invalid("n 0", [](auto& a) { a.n = 0; });
  expect_invalid("p0 -1", [](auto& a) { a.p0 = -1; });
  expect_invalid("p0 + n > kv_capacity", [](auto& a) { a.p0 = 9; });
  expect_invalid("q_row_stride not a multiple of 8", [](auto& a) { a.q_row_stride += 4; });
  expect_invalid("q misaligned", [](auto& a) { a.q += 1; });
  expect_invalid("k_cache misaligned", [](auto& a) { a.k_cache += 4; });
  expect_invalid("out misaligned", [](auto& a) { a.out += 2; });
  expect_invalid("null v_cache", [](auto& a) { a.v_cache = nullptr; });
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "a rejected call left an error behind";
}
