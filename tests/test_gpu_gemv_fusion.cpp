// The decode step's norms folded into its GEMVs (gemv_fusion, kernels/decode/gemv_bf16.h) on the
// GPU (label gpu; each test skips with a visible message where no CUDA device exists): a folded
// RMSNorm gives the bits of the norm kernel followed by the plain GEMV, and matches an fp64
// oracle of the norm and the product; the residual add in the store gives the bits of adding
// the plain GEMV's output, in every family. Odd shapes: rows no block divides, rows of 1..4
// rounds of the norm's 256 chunks, batches past a kernel's batch group.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gemv_test_problem.h"
#include "gpu_test_support.h"

#include "gpu/cuda_check.h"
#include "gpu/device_buffer.h"
#include "kernels/decode/decode_kernels.h"
#include "kernels/decode/gemv_bf16.h"

using namespace kg;
using namespace kg::gemv_test;

namespace {

constexpr float eps = 1e-6f;

std::vector<std::uint16_t> download(const device_buffer& b, std::size_t count) {
  std::vector<std::uint16_t> v(count);
  KG_CUDA_CHECK(cudaDeviceSynchronize());
  KG_CUDA_CHECK(cudaMemcpy(v.data(), b.get(), count * 2, cudaMemcpyDeviceToHost));
  return v;
}

void upload(device_buffer& b, const std::vector<std::uint16_t>& v) {
  KG_CUDA_CHECK(cudaMemcpy(b.get(), v.data(), v.size() * 2, cudaMemcpyHostToDevice));
}

std::size_t count_differences(const std::vector<std::uint16_t>& a,
                              const std::vector<std::uint16_t>& b) {
  std::size_t d = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    d += a[i] != b[i];
  return d;
}

// A norm weight around 1 (0.5 .. 1.5), as a trained model's.
std::vector<std::uint16_t> norm_weight(int k) {
  auto g = random_bf16(static_cast<std::size_t>(k), 4242);
  for (auto& e : g)
    e = to_bf16_bits(static_cast<float>(1.0 + 0.5 * from_bf16_bits(e)));
  return g;
}

// fp64: y[b, r] = w_r . (h_b / rms(h_b) * g), and the sum of the terms' magnitudes. The kernels
// round each normalised element to bf16 twice (after the scale, after the weight: 2^-8 relative
// at most together), so |y - oracle| <= 2^-8 (that magnitude) + y's own rounding.
void check_against_oracle(const problem& p, const std::vector<std::uint16_t>& g,
                          const std::vector<std::uint16_t>& y) {
  int wrong = 0;
  for (int b = 0; b < p.batch; ++b) {
    double ss = 0;
    for (int i = 0; i < p.k; ++i) {
      const double h = from_bf16_bits(p.x[std::size_t(b) * p.k + i]);
      ss += h * h;
    }
    const double inv = 1.0 / std::sqrt(ss / p.k + eps);
    for (int r = 0; r < p.n; ++r) {
      double want = 0, mag = 0;
      for (int i = 0; i < p.k; ++i) {
        const double t = from_bf16_bits(p.w[std::size_t(r) * p.k + i]) *
                         from_bf16_bits(p.x[std::size_t(b) * p.k + i]) * inv *
                         from_bf16_bits(g[std::size_t(i)]);
        want += t;
        mag += std::fabs(t);
      }
      const double got = from_bf16_bits(y[std::size_t(b) * p.n + r]);
      if (!(std::fabs(got - want) <=
            std::ldexp(mag, -8) + std::ldexp(std::fabs(want), -8) + 1e-3) &&
          wrong++ < 3)
        ADD_FAILURE() << "y[" << b << ", " << r << "] = " << got << ", fp64 oracle " << want;
    }
  }
  EXPECT_EQ(wrong, 0);
}

// A norm over p's x both ways: its weight g (host and device), x through the norm kernel (no
// delta: the reference chain's first kernel) in `normed`, and the fusion that folds it instead.
struct folded_norm {
  std::vector<std::uint16_t> g;
  device_buffer dg, normed;
  gemv_fusion f;

  explicit folded_norm(problem& p) : g(norm_weight(p.k)), dg(g.size() * 2), normed(p.dx.size()) {
    upload(dg, g);
    KG_CUDA_CHECK(decode::launch_add_rmsnorm(nullptr, bf16(p.dx),
                                             static_cast<const __nv_bfloat16*>(dg.get()),
                                             bf16(normed), p.batch, p.k, eps, nullptr));
    f.norm_weight = static_cast<const __nv_bfloat16*>(dg.get());
    f.norm_eps = eps;
  }
};

struct shape {
  int batch, n, k;
  std::vector<gemv_config> configs;
};

} // namespace

// The folded norm against the chain it replaces (launch_add_rmsnorm, then the GEMV on its
// output): the same bits, in every simt arrangement (rows per warp, split K through the
// workspace and through a cluster), then the fp64 oracle and a bitwise repeat.
TEST(gpu_gemv_fusion, a_folded_norm_gives_the_bits_of_the_norm_kernel_then_the_gemv) {
  KG_REQUIRE_GPU();
  const std::vector<gemv_config> simt = {
      {1, 4, 4, 1}, {2, 4, 2, 1}, {4, 8, 2, 1}, {2, 8, 2, 4}, {1, 8, 4, 2, gemv_kind::simt, 1}};
  const shape shapes[] = {{1, 6144, 2560, {*pick_gemv_config_folded(1, 6144, 2560, false)}},
                          {1, 1001, 8 * 321, simt},   // 321 chunks: two rounds, the second short
                          {3, 517, 8 * 40, simt},     // one round, most lanes idle
                          {17, 333, 8 * 1000, simt}}; // four rounds; past a batch group
  for (const auto& sh : shapes) {
    problem p(sh.batch, sh.n, sh.k);
    folded_norm norm(p);
    const gemv_fusion& f = norm.f;
    device_buffer y(p.dy.size());
    for (const auto& c : sh.configs) {
      SCOPED_TRACE(name(c) + ", batch " + std::to_string(sh.batch) + ", n " + std::to_string(sh.n) +
                   ", k " + std::to_string(sh.k));
      ASSERT_TRUE(gemv_config_supported(c, sh.batch, sh.n, sh.k));
      ASSERT_TRUE(gemv_fusion_supported(c, f, sh.k, false));
      device_buffer ws(gemv_workspace_bytes(c, sh.batch, sh.n, sh.k));
      KG_CUDA_CHECK(cudaMemset(ws.get(), 0, ws.size()));
      KG_CUDA_CHECK(launch_gemv_bf16(bf16(norm.normed), bf16(p.dw), bf16(y), sh.batch, sh.n, sh.k,
                                     c, ws.get(), nullptr));
      const auto want = download(y, y.size() / 2);
      std::vector<std::uint16_t> first;
      for (int run = 0; run < 3; ++run) {
        KG_CUDA_CHECK(cudaMemset(p.dy.get(), 0xff, p.dy.size()));
        KG_CUDA_CHECK(launch_gemv_bf16(bf16(p.dx), bf16(p.dw), bf16(p.dy), sh.batch, sh.n, sh.k, c,
                                       ws.get(), nullptr, false, &f));
        const auto got = download(p.dy, p.dy.size() / 2);
        EXPECT_EQ(count_differences(got, want), 0u) << "run " << run + 1 << " vs the two kernels";
        if (run == 0) {
          check_against_oracle(p, norm.g, got);
          first = got;
        } else {
          EXPECT_EQ(got, first) << "run " << run + 1 << " differs bitwise";
        }
      }
    }
  }
}

// The gated launch (gate_up with the SiLU gate) with the post-attention norm folded in: the bits
// of the norm kernel, the GEMV and the gate kernel, on the engine's batch-1 shape and odd ones.
TEST(gpu_gemv_fusion, the_gated_launch_folds_the_norm_with_the_same_bits) {
  KG_REQUIRE_GPU();
  const shape shapes[] = {{1, 19456, 2560, {*pick_gemv_config_folded(1, 19456, 2560, true)}},
                          {3, 2 * 1001, 8 * 301, {{2, 4, 2, 1}, {2, 16, 8, 1}}},
                          {17, 2 * 333, 8 * 50, {{2, 8, 4, 1}}}};
  for (const auto& sh : shapes) {
    problem p(sh.batch, sh.n, sh.k);
    folded_norm norm(p);
    const gemv_fusion& f = norm.f;
    const std::size_t half = std::size_t(sh.batch) * sh.n / 2;
    device_buffer a(half * 2), b(half * 2);
    for (const auto& c : sh.configs) {
      SCOPED_TRACE(name(c) + ", batch " + std::to_string(sh.batch) + ", n " + std::to_string(sh.n));
      ASSERT_TRUE(gemv_gated_supported(c, sh.batch, sh.n, sh.k));
      ASSERT_TRUE(gemv_fusion_supported(c, f, sh.k, true));
      KG_CUDA_CHECK(launch_gemv_bf16_gated(bf16(norm.normed), bf16(p.dw), bf16(a), sh.batch, sh.n,
                                           sh.k, c, nullptr));
      KG_CUDA_CHECK(cudaMemset(b.get(), 0xff, b.size()));
      KG_CUDA_CHECK(launch_gemv_bf16_gated(bf16(p.dx), bf16(p.dw), bf16(b), sh.batch, sh.n, sh.k, c,
                                           nullptr, false, &f));
      const auto want = download(a, half), got = download(b, half);
      EXPECT_EQ(count_differences(got, want), 0u) << "of " << half << " outputs";
    }
  }
}

// add_to_y: y <- bf16(y + bf16(x . w)), checked against the plain launch's bits added on the
// host (float addition of two bf16 values, rounded to nearest even: the norm kernel's residual
// add), in every family, through split-K finishes scalar (517 rows) and by quads (516 rows),
// cluster finishes (simt, wgmma_ws, wgmma_pk, wgmma_sw), batch tiles part filled and batches of
// several launches.
TEST(gpu_gemv_fusion, adding_into_y_gives_the_residual_adds_bits_in_every_family) {
  KG_REQUIRE_GPU();
  const auto gemm = [](int rpw, int wpb, int stages, int split, int batch_warps) {
    gemv_config c{rpw, wpb, stages, split, gemv_kind::gemm};
    c.batch_warps = batch_warps;
    return c;
  };
  const std::vector<gemv_config> configs = {
      {2, 4, 2, 1},
      {2, 8, 2, 4},
      {1, 8, 4, 2, gemv_kind::simt, 1},
      {2, 8, 2, 2, gemv_kind::bulk},
      {16, 4, 2, 1, gemv_kind::mma},
      {16, 4, 2, 4, gemv_kind::mma},
      {16, 8, 2, 2, gemv_kind::packed},
      {2, 16, 2, 1, gemv_kind::sweep},
      {1, 8, 1, 1, gemv_kind::sweep}, // 4 rows a block, one at a time
      {1, 16, 1, 1, gemv_kind::tsweep},
      {2, 8, 2, 2, gemv_kind::tsweep},
      gemm(16, 8, 4, 1, 1),
      gemm(32, 4, 3, 4, 2),
      {64, 4, 3, 2, gemv_kind::wgmma},
      {128, 8, 4, 1, gemv_kind::wgmma_tma},
      {64, 4, 6, 3, gemv_kind::wgmma_ws},
      {64, 4, 6, 2, gemv_kind::wgmma_pk},
      {64, 4, 6, 3, gemv_kind::wgmma_ws, 1},
      {64, 4, 4, 2, gemv_kind::wgmma_pk, 1},
      {48, 4, 4, 1, gemv_kind::wgmma_sw},
      {40, 4, 6, 2, gemv_kind::wgmma_sw},
      {40, 4, 8, 2, gemv_kind::wgmma_sw, 1}};
  gemv_fusion add;
  add.add_to_y = true;
  int checked = 0;
  for (const int batch : {1, 2, 5, 40}) // (2: the sweep family's two storing threads)
    for (const int n : {516, 517}) {
      problem p(batch, n, 8 * 160);
      const auto y0 = random_bf16(p.dy.size() / 2, 99 + n);
      device_buffer ws(gemv_workspace_bytes({1, 4, 2, 8}, batch, n, p.k));
      KG_CUDA_CHECK(cudaMemset(ws.get(), 0, ws.size()));
      for (const auto& c : configs) {
        if (!gemv_config_supported(c, batch, n, p.k)) continue;
        SCOPED_TRACE(name(c) + ", batch " + std::to_string(batch) + ", n " + std::to_string(n));
        ASSERT_TRUE(gemv_fusion_supported(c, add, p.k, false));
        const auto plain = p.run(c, ws.get());
        std::vector<std::uint16_t> want(plain.size());
        for (std::size_t i = 0; i < want.size(); ++i)
          want[i] = to_bf16_bits(static_cast<float>(from_bf16_bits(y0[i])) +
                                 static_cast<float>(from_bf16_bits(plain[i])));
        upload(p.dy, y0);
        const gemv_layout l = gemv_weight_layout(c);
        const device_buffer& w = l == gemv_layout::packed        ? p.dw_packed
                                 : l == gemv_layout::wgmma_tiles ? p.dw_tiles
                                                                 : p.dw;
        KG_CUDA_CHECK(launch_gemv_bf16(bf16(p.dx), static_cast<const __nv_bfloat16*>(w.get()),
                                       bf16(p.dy), batch, n, p.k, c, ws.get(), nullptr, false,
                                       &add));
        EXPECT_EQ(count_differences(download(p.dy, want.size()), want), 0u)
            << "of " << want.size() << " outputs";
        ++checked;
      }
    }
  EXPECT_GE(checked, 80); // (22 configurations at 4 batches x 2 shapes, less the unsupported)
}
