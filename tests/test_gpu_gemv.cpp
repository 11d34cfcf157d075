// The decode GEMV (kernels/decode/gemv_bf16.h) on the GPU (label gpu; each test skips with a
// visible message where no CUDA device exists): every supported configuration of every family
// (simt, bulk, mma, sweep, tsweep, packed, gemm, wgmma, wgmma_tma, wgmma_ws, wgmma_pk) against an
// fp64 oracle on odd shapes (row tails, K slices of odd length, partial batch groups), and bitwise
// identical output across runs, split K included.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "gemv_test_problem.h"
#include "gpu_test_support.h"

#include "gpu/cuda_check.h"
#include "gpu/cuda_raii.h"
#include "gpu/device_buffer.h"
#include "kernels/decode/decode_kernels.h"
#include "kernels/decode/gemv_bf16.h"

using namespace kg;

namespace {

using namespace kg::gemv_test;

gemv_config gemm_config(int rpw, int wpb, int stages, int split, int batch_warps) {
  gemv_config c{rpw, wpb, stages, split, gemv_kind::gemm};
  c.batch_warps = batch_warps;
  return c;
}

// `c` on `p` against the oracle, then once more for bitwise identity.
void check_config(problem& p, const gemv_config& c, void* ws) {
  SCOPED_TRACE(name(c) + ", batch " + std::to_string(p.batch) + ", n " + std::to_string(p.n) +
               ", k " + std::to_string(p.k));
  const auto y = p.run(c, ws);
  int wrong = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    // One rounding to bf16 (2^-9 relative) plus float32 accumulation slack.
    const double want = p.oracle[i], got = from_bf16_bits(y[i]);
    if (!(std::fabs(got - want) <= std::ldexp(std::fabs(want), -8) + 1e-3) && wrong++ < 3)
      ADD_FAILURE() << "y[" << i / p.n << ", " << i % p.n << "] = " << got << ", fp64 oracle "
                    << want;
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(p.run(c, ws), y) << "two runs differ bitwise";
}

// Every supported configuration of `kind` on `p` with the given cluster setting, through one
// workspace zero-filled once (the interface promises it serves every configuration and family in
// turn). Returns how many.
int check_family(problem& p, gemv_kind kind, int cluster = 0) {
  device_buffer ws(gemv_workspace_bytes({1, 4, 2, 8}, p.batch, p.n, p.k));
  KG_CUDA_CHECK(cudaMemset(ws.get(), 0, ws.size()));
  int checked = 0;
  for (int split : {1, 2, 4, 8})
    for (int rpw : {1, 2, 4, 16})
      for (int unroll : {2, 4, 8})
        for (int wpb : {4, 8, 16}) {
          const gemv_config c{rpw, wpb, unroll, split, kind, cluster};
          if (!gemv_config_supported(c, p.batch, p.n, p.k)) continue;
          EXPECT_LE(gemv_workspace_bytes(c, p.batch, p.n, p.k), ws.size());
          check_config(p, c, ws.get());
          ++checked;
        }
  return checked;
}

// `c` on `p` against the oracle through a workspace of its own, then `repeats` more runs that
// must give the first run's bits.
void check_then_repeat(problem& p, const gemv_config& c, int repeats) {
  device_buffer ws(gemv_workspace_bytes(c, p.batch, p.n, p.k));
  KG_CUDA_CHECK(cudaMemset(ws.get(), 0, ws.size()));
  check_config(p, c, ws.get());
  const auto first = p.run(c, ws.get());
  for (int i = 0; i < repeats; ++i)
    ASSERT_EQ(p.run(c, ws.get()), first) << name(c) << ": run " << i + 2 << " differs";
}

// Every supported gemm configuration on `p`, through one workspace zero-filled once. Returns how
// many.
int check_gemm_family(problem& p) {
  device_buffer ws(gemv_workspace_bytes({1, 4, 2, 8}, p.batch, p.n, p.k));
  KG_CUDA_CHECK(cudaMemset(ws.get(), 0, ws.size()));
  int checked = 0;
  for (int split : {1, 2, 3, 4, 8})
    for (int rpw : {16, 32, 64})
      for (int wpb : {4, 8})
        for (int bw : {1, 2})
          for (int stages : {3, 4}) {
            const gemv_config c = gemm_config(rpw, wpb, stages, split, bw);
            if (!gemv_config_supported(c, p.batch, p.n, p.k)) continue;
            check_config(p, c, ws.get());
            ++checked;
          }
  return checked;
}

// Every supported configuration of a wgmma family (`kind`) on `p`, through one workspace
// zero-filled once. Returns how many.
int check_wgmma_family(problem& p, gemv_kind kind) {
  device_buffer ws(gemv_workspace_bytes({1, 4, 2, 8}, p.batch, p.n, p.k));
  KG_CUDA_CHECK(cudaMemset(ws.get(), 0, ws.size()));
  int checked = 0;
  for (int split : {1, 2, 3, 4, 8})
    for (int rpg : {64, 128})
      for (int wpb : {4, 8})
        for (int stages : {3, 4}) {
          const gemv_config c{rpg, wpb, stages, split, kind};
          if (!gemv_config_supported(c, p.batch, p.n, p.k)) continue;
          check_config(p, c, ws.get());
          ++checked;
        }
  return checked;
}

void check_all_configs(problem& p) {
  // 4 split_k x 8 (rows_per_warp, unroll) x 3 warps_per_block; with the cluster finish, the
  // three split_k above 1 (on the empty K slices of the larger splits too)
  EXPECT_EQ(check_family(p, gemv_kind::simt), 96);
  EXPECT_EQ(check_family(p, gemv_kind::simt, 1), 72);
}

} // namespace

TEST(gpu_gemv, every_configuration_matches_the_fp64_oracle_on_odd_shapes) {
  KG_REQUIRE_GPU();
  for (int batch : {1, 3, 8, 13}) {
    problem p(batch, 37, 8 * 53);
    check_all_configs(p);
  }
}

// Several row tiles per launch (each with its own split-K counter), batches above one kernel
// group (33 = two launches for every rows_per_warp), K slices of uneven length.
TEST(gpu_gemv, many_row_tiles_and_batches_above_a_group_match_the_oracle) {
  KG_REQUIRE_GPU();
  for (int batch : {5, 33}) {
    problem p(batch, 517, 8 * 301);
    check_all_configs(p);
  }
}

// Split K's last-block reduction must not depend on which block finishes last: many repeats
// of a launch with thousands of blocks racing to the per-tile counters give one bit pattern.
TEST(gpu_gemv, split_k_is_bitwise_repeatable_under_many_racing_blocks) {
  KG_REQUIRE_GPU();
  problem p(8, 4099, 8 * 1216);
  for (const gemv_config c : {gemv_config{1, 4, 2, 8}, gemv_config{4, 8, 2, 4}}) {
    device_buffer ws(gemv_workspace_bytes(c, p.batch, p.n, p.k));
    KG_CUDA_CHECK(cudaMemset(ws.get(), 0, ws.size()));
    const auto first = p.run(c, ws.get());
    for (int i = 0; i < 20; ++i)
      ASSERT_EQ(p.run(c, ws.get()), first) << name(c) << ": run " << i + 2 << " differs";
  }
}

// The bulk (cp.async.bulk ring) and mma (tensor core) families, every supported configuration,
// on odd n (a partial last row tile: the bulk family copies only the valid rows, the mma family
// reads row 0 in their place), K not a multiple of a stage or a super-step (a short last stage,
// a partial super-step, empty K slices for the larger splits), and batches 1, 3, 8 (partial
// batch tiles) and 32 (four bulk launches; one mma launch with four 8-column tiles).
TEST(gpu_gemv, bulk_and_mma_families_match_the_oracle_and_repeat_bitwise) {
  KG_REQUIRE_GPU();
  for (int batch : {1, 3, 8, 32}) {
    problem p(batch, 37, 8 * 53);
    // 4 split_k x (3 rows_per_warp x 3 stages x 2 warps_per_block - 4 rings above 96 KB: 16
    // rows x 8 stages twice, 32 rows x 4 and 8 stages)
    EXPECT_EQ(check_family(p, gemv_kind::bulk), 4 * 14);
    // 4 split_k x (unroll 2: 3 warps_per_block, unroll 4: 2); the cluster finish is simt's only
    EXPECT_EQ(check_family(p, gemv_kind::mma), 4 * 5);
    EXPECT_EQ(check_family(p, gemv_kind::mma, 1), 0);
    EXPECT_EQ(check_family(p, gemv_kind::bulk, 1), 0);
  }
  // Many row tiles and stages: 8 * 1333 elements = 10.4 stages of 1 KB per row, odd n.
  for (int batch : {1, 8}) {
    problem p(batch, 517, 8 * 1333);
    check_family(p, gemv_kind::bulk);
    check_family(p, gemv_kind::mma);
  }
}

// The packed layout as gemv_bf16.h documents it, chunk by chunk, on odd n (a last tile with rows
// past n: zero) and an odd number of 64-element steps.
TEST(gpu_gemv, the_packed_copy_puts_every_chunk_where_the_layout_says) {
  KG_REQUIRE_GPU();
  const int n = 37, k = 64 * 7, steps = k / 64, tiles = (n + 15) / 16;
  problem p(1, n, k);
  ASSERT_EQ(p.dw_packed.size(), std::size_t(tiles) * 16 * k * 2);
  std::vector<std::uint16_t> got(p.dw_packed.size() / 2);
  KG_CUDA_CHECK(
      cudaMemcpy(got.data(), p.dw_packed.get(), p.dw_packed.size(), cudaMemcpyDeviceToHost));
  int wrong = 0;
  for (int tile = 0; tile < tiles; ++tile)
    for (int step = 0; step < steps; ++step)
      for (int i = 0; i < 2; ++i)
        for (int h = 0; h < 2; ++h)
          for (int g = 0; g < 8; ++g)
            for (int t = 0; t < 4; ++t) {
              const std::size_t chunk =
                  ((std::size_t(tile) * steps + step) * 4 + 2 * i + h) * 32 + 4 * g + t;
              const int row = 16 * tile + 8 * i + g, col = 64 * step + 8 * (2 * t + h);
              for (int e = 0; e < 8; ++e) {
                const std::uint16_t want = row < n ? p.w[std::size_t(row) * k + col + e] : 0;
                if (got[chunk * 8 + e] != want && wrong++ < 3)
                  ADD_FAILURE() << "chunk " << chunk << " element " << e << ": row " << row
                                << " column " << col + e;
              }
            }
  EXPECT_EQ(wrong, 0);
}

// The packed family, every supported configuration: odd n (a last tile with rows past n), an odd
// number of steps (a partial super-step; empty K slices for split 8 on 7 steps), many tiles, and
// batches 1, 3, 8 and 32 (four 8-column tiles), against the oracle and bitwise repeatable.
TEST(gpu_gemv, the_packed_family_matches_the_oracle_and_repeats_bitwise) {
  KG_REQUIRE_GPU();
  for (int batch : {1, 3, 8, 32}) {
    problem p(batch, 37, 64 * 7);
    // 4 split_k x (unroll 2: 3 warps_per_block, unroll 4: 2), as the mma family
    EXPECT_EQ(check_family(p, gemv_kind::packed), 4 * 5);
    EXPECT_EQ(check_family(p, gemv_kind::packed, 1), 0); // no cluster finish
  }
  for (int batch : {1, 8}) {
    problem p(batch, 517, 64 * 83);
    EXPECT_EQ(check_family(p, gemv_kind::packed), 4 * 5);
  }
  // K must be whole steps: 8 x 53 is not, and the launch refuses it.
  EXPECT_FALSE(gemv_config_supported({16, 4, 2, 1, gemv_kind::packed}, 1, 37, 8 * 53));
}

// Without split K the packed family feeds the same registers to the same mma's in the same order
// as the mma family: the same bits (with split K its slices interleave, the mma family's do not).
TEST(gpu_gemv, the_packed_family_gives_the_mma_family_bits) {
  KG_REQUIRE_GPU();
  for (int batch : {8, 32}) {
    problem p(batch, 517, 9728); // the down projection's k
    device_buffer ws(gemv_workspace_bytes({16, 4, 2, 8, gemv_kind::mma}, p.batch, p.n, p.k));
    KG_CUDA_CHECK(cudaMemset(ws.get(), 0, ws.size()));
    int compared = 0;
    for (int split : {1})
      for (int unroll : {2, 4})
        for (int wpb : {4, 8, 16}) {
          const gemv_config mma{16, wpb, unroll, split, gemv_kind::mma};
          const gemv_config packed{16, wpb, unroll, split, gemv_kind::packed};
          if (!gemv_config_supported(mma, batch, p.n, p.k)) continue;
          ASSERT_TRUE(gemv_config_supported(packed, batch, p.n, p.k));
          EXPECT_EQ(p.run(packed, ws.get()), p.run(mma, ws.get())) << name(packed);
          ++compared;
        }
    EXPECT_EQ(compared, 5);
  }
}

// The sweep family, every configuration: n below the grid (blocks with no row), odd n (blocks
// with a row fewer, rows not a multiple of the ring), K not a multiple of a block's pass (masked
// chunks), up to 8 chunks per thread (k / 8 = 2048 with 8 warps), batch 1, 2 and 3 (two
// launches), against the oracle and bitwise repeatable.
TEST(gpu_gemv, the_sweep_family_matches_the_oracle_and_repeats_bitwise) {
  KG_REQUIRE_GPU();
  int checked = 0;
  for (const auto& [n, k] : {std::pair{37, 8 * 53}, std::pair{1517, 8 * 1333},
                             std::pair{300, 8 * 2048}, std::pair{2560, 9728}})
    for (int batch : {1, 2, 3}) {
      problem p(batch, n, k);
      for (int grid : {1, 2, 3, 4})
        for (int unroll : {1, 2, 4})
          for (int wpb : {8, 16}) {
            const gemv_config c{grid, wpb, unroll, 1, gemv_kind::sweep};
            if (!gemv_config_supported(c, batch, n, k)) continue;
            check_config(p, c, nullptr);
            ++checked;
          }
    }
  EXPECT_EQ(checked, 4 * 3 * 24); // every one supported on these shapes
}

// The tile-sweep family, every configuration: n not a multiple of 16 (a tile with rows past n)
// and below the grid's row lanes (blocks with no tile), K slices not a multiple of a block's pass
// (masked chunks), up to 8 chunks per lane, every split (row lanes sharing tiles, the per-lane
// counter), batch 1, 3, 8 and 9 (two launches), through one workspace zero-filled once, against
// the oracle and bitwise repeatable.
TEST(gpu_gemv, the_tile_sweep_family_matches_the_oracle_and_repeats_bitwise) {
  KG_REQUIRE_GPU();
  int checked = 0;
  for (const auto& [n, k] : {std::pair{37, 8 * 53}, std::pair{1517, 8 * 1333},
                             std::pair{300, 8 * 2048}, std::pair{2560, 9728}})
    for (int batch : {1, 3, 8, 9}) {
      problem p(batch, n, k);
      device_buffer ws(gemv_workspace_bytes({1, 4, 2, 8}, p.batch, p.n, p.k));
      KG_CUDA_CHECK(cudaMemset(ws.get(), 0, ws.size()));
      int here = 0;
      for (int grid : {1, 2, 3, 4})
        for (int split : {1, 2, 4, 8})
          for (int unroll : {1, 2})
            for (int wpb : {4, 8, 16}) {
              const gemv_config c{grid, wpb, unroll, split, gemv_kind::tsweep};
              if (!gemv_config_supported(c, batch, n, k)) continue;
              check_config(p, c, ws.get());
              ++here;
            }
      EXPECT_GT(here, 0) << n << "x" << k << " batch " << batch << ": no configuration";
      checked += here;
    }
  // The down projection's candidates at batch 8 are among them (kg_bench_gemv_sweep times them).
  EXPECT_TRUE(gemv_config_supported({1, 16, 1, 4, gemv_kind::tsweep}, 8, 2560, 9728));
  EXPECT_GT(checked, 100);
}

// The gemm family (batch 16 to 128 on the tensor cores, both operands staged in shared memory),
// every configuration: n not a multiple of any block's rows (a last tile with rows past n,
// zero-filled), k not a multiple of the 64-element k tile (a zero-filled partial last tile), K
// slices of uneven length and empty ones (split 8 of 7 k tiles), batches that fill no batch tile
// (1, 13, 33, 100) or exactly (16, 64, 128), and 130 (a group of 128, then one of 2), against
// the fp64 oracle and bitwise repeatable.
TEST(gpu_gemv, the_gemm_family_matches_the_oracle_and_repeats_bitwise) {
  KG_REQUIRE_GPU();
  for (const auto& [n, k] : {std::pair{37, 8 * 53}, std::pair{517, 8 * 1333}})
    for (int batch : {1, 13, 16, 33, 64, 100, 128, 130}) {
      problem p(batch, n, k);
      EXPECT_GT(check_gemm_family(p), 0) << n << "x" << k << " batch " << batch;
    }
  // At batch 16 on the odd shape: 5 splits x 3 rows x 2 warps x 2 batch_warps x 2 stages, less
  // 64 rows x 8 warps with one across the batch (512 rows a block) at each split and stage count.
  problem p(16, 37, 8 * 53);
  EXPECT_EQ(check_gemm_family(p), 120 - 5 * 2);
}

// The wgmma family (the gemm family's ring read by warpgroup instructions): every configuration,
// on the gemm family's odd shapes and batches (a last row tile past n, a partial last k tile,
// empty K slices, batch tiles 16 to 128 part filled, a batch of two groups), against the fp64
// oracle and bitwise repeatable; then the down projection's shape with its split K under
// hundreds of racing blocks, ten times over.
TEST(gpu_gemv, the_wgmma_family_matches_the_oracle_and_repeats_bitwise) {
  KG_REQUIRE_GPU();
  for (const auto& [n, k] : {std::pair{37, 8 * 53}, std::pair{517, 8 * 1333}})
    for (int batch : {1, 13, 16, 33, 64, 100, 128, 130}) {
      problem p(batch, n, k);
      // 5 splits x 2 rows x 2 warpgroup counts x 2 stage counts, every one within the limits.
      EXPECT_EQ(check_wgmma_family(p, gemv_kind::wgmma), 40) << n << "x" << k << " batch " << batch;
    }
  for (int batch : {32, 128}) {
    problem p(batch, 2560, 9728);
    for (const gemv_config c :
         {gemv_config{128, 8, 4, 4, gemv_kind::wgmma}, gemv_config{64, 4, 3, 8, gemv_kind::wgmma}})
      check_then_repeat(p, c, 10);
  }
}

// The wgmma_tma family (the wgmma kernel, its ring filled by TMA tensor copies, whose zero fill
// stands for the rows past n, the partial last k tile and the batch rows past nb): every
// configuration on the same odd shapes against the oracle, the same bits as the wgmma family's
// configuration (the same sums in the same order), and the down projection's split K repeated.
TEST(gpu_gemv, the_wgmma_tma_family_matches_the_oracle_and_the_wgmma_bits) {
  KG_REQUIRE_GPU();
  for (const auto& [n, k] : {std::pair{37, 8 * 53}, std::pair{517, 8 * 1333}})
    for (int batch : {1, 13, 16, 33, 64, 100, 128, 130}) {
      problem p(batch, n, k);
      EXPECT_EQ(check_wgmma_family(p, gemv_kind::wgmma_tma), 40)
          << n << "x" << k << " batch " << batch;
      device_buffer ws(gemv_workspace_bytes({1, 4, 2, 8}, p.batch, p.n, p.k));
      KG_CUDA_CHECK(cudaMemset(ws.get(), 0, ws.size()));
      for (const gemv_config c : {gemv_config{64, 4, 3, 1, gemv_kind::wgmma_tma},
                                  gemv_config{128, 8, 4, 4, gemv_kind::wgmma_tma},
                                  gemv_config{64, 8, 4, 8, gemv_kind::wgmma_tma}}) {
        gemv_config twin = c;
        twin.kind = gemv_kind::wgmma;
        if (!gemv_config_supported(c, p.batch, p.n, p.k)) continue;
        EXPECT_EQ(p.run(c, ws.get()), p.run(twin, ws.get()))
            << name(c) << " on " << n << "x" << k << " batch " << batch;
      }
    }
  for (int batch : {32, 128}) {
    problem p(batch, 2560, 9728);
    for (const gemv_config c : {gemv_config{128, 8, 4, 4, gemv_kind::wgmma_tma},
                                gemv_config{64, 4, 3, 8, gemv_kind::wgmma_tma}})
      check_then_repeat(p, c, 10);
  }
}

// The wgmma_ws family (the wgmma_tma tiles, a producer warpgroup and a deep ring released stage
// by stage): every configuration on the same odd shapes against the oracle (each shape and batch
// has some: 64-row tiles with 6 or 8 stages fit every batch tile), the same bits as the wgmma
// family's configuration of the same tile, and the down and qkv projections' shapes repeated,
// with split K and without, at rings of several turns (2560 / 64 = 40 k tiles on 16 stages).
TEST(gpu_gemv, the_wgmma_ws_family_matches_the_oracle_and_the_wgmma_bits) {
  KG_REQUIRE_GPU();
  for (const auto& [n, k] : {std::pair{37, 8 * 53}, std::pair{517, 8 * 1333}})
    for (int batch : {1, 13, 16, 33, 64, 100, 128, 130}) {
      problem p(batch, n, k);
      device_buffer ws(gemv_workspace_bytes({1, 4, 2, 8}, p.batch, p.n, p.k));
      KG_CUDA_CHECK(cudaMemset(ws.get(), 0, ws.size()));
      int checked = 0;
      for (int split : {1, 2, 3, 4, 8})
        for (int rpg : {64, 128})
          for (int wpb : {4, 8})
            for (int stages : {6, 8, 12, 16}) {
              const gemv_config c{rpg, wpb, stages, split, gemv_kind::wgmma_ws};
              if (!gemv_config_supported(c, p.batch, p.n, p.k)) continue;
              check_config(p, c, ws.get());
              gemv_config twin{rpg, wpb, 3, split, gemv_kind::wgmma};
              if (gemv_config_supported(twin, p.batch, p.n, p.k)) {
                EXPECT_EQ(p.run(c, ws.get()), p.run(twin, ws.get()))
                    << name(c) << " on " << n << "x" << k << " batch " << batch;
              }
              ++checked;
            }
      EXPECT_GE(checked, 10) << n << "x" << k << " batch " << batch; // 5 splits x 6, 8 stages
    }
  for (int batch : {16, 32, 128}) {
    problem down(batch, 2560, 9728), qkv(batch, 6144, 2560);
    for (const gemv_config c : {gemv_config{64, 4, 8, 4, gemv_kind::wgmma_ws},
                                gemv_config{64, 4, 6, 1, gemv_kind::wgmma_ws}}) {
      check_then_repeat(down, c, 5);
      check_then_repeat(qkv, c, 5);
    }
    if (batch <= 32) check_then_repeat(qkv, {64, 4, 16, 1, gemv_kind::wgmma_ws}, 5);
  }
}

// The wgmma_tiles layout as gemv_bf16.h documents it, chunk by chunk, on odd n (rows up to 256
// zero) and k not a whole number of k tiles (7 k tiles of which the last holds 40 columns).
TEST(gpu_gemv, the_wgmma_tiles_copy_puts_every_chunk_where_the_layout_says) {
  KG_REQUIRE_GPU();
  const int n = 37, k = 424, k_tiles = 7, rows = 256;
  problem p(1, n, k);
  ASSERT_EQ(p.dw_tiles.size(), std::size_t(rows) * k_tiles * 64 * 2);
  std::vector<std::uint16_t> got(p.dw_tiles.size() / 2);
  KG_CUDA_CHECK(
      cudaMemcpy(got.data(), p.dw_tiles.get(), p.dw_tiles.size(), cudaMemcpyDeviceToHost));
  int wrong = 0;
  for (int tile = 0; tile < rows / 64; ++tile)
    for (int kt = 0; kt < k_tiles; ++kt)
      for (int r = 0; r < 64; ++r)
        for (int c = 0; c < 8; ++c) {
          const std::size_t at =
              (std::size_t(tile) * k_tiles + kt) * 4096 + r * 64 + (c ^ (r % 8)) * 8;
          const int row = 64 * tile + r, col = 64 * kt + 8 * c;
          for (int e = 0; e < 8; ++e) {
            const std::uint16_t want = row < n && col < k ? p.w[std::size_t(row) * k + col + e] : 0;
            if (got[at + e] != want && wrong++ < 3)
              ADD_FAILURE() << "element " << at + e << ": row " << row << " column " << col + e;
          }
        }
  EXPECT_EQ(wrong, 0);
}

// The wgmma_pk family (the wgmma_ws block over the wgmma_tiles copy, by plain bulk copies):
// every configuration on the odd shapes against the oracle, the same bits as the wgmma_ws
// configuration of the same tile and split (its stages hold the same bytes), and the qkv, o_proj
// and down projections' shapes repeated, with split K and without.
TEST(gpu_gemv, the_wgmma_pk_family_matches_the_oracle_and_the_wgmma_ws_bits) {
  KG_REQUIRE_GPU();
  for (const auto& [n, k] : {std::pair{37, 8 * 53}, std::pair{517, 8 * 1333}})
    for (int batch : {1, 13, 16, 33, 64, 100, 128, 130}) {
      problem p(batch, n, k);
      device_buffer ws(gemv_workspace_bytes({1, 4, 2, 8}, p.batch, p.n, p.k));
      KG_CUDA_CHECK(cudaMemset(ws.get(), 0, ws.size()));
      int checked = 0, twins = 0;
      for (int split : {1, 2, 3, 4, 8})
        for (int rpg : {64, 128})
          for (int wpb : {4, 8})
            for (int stages : {4, 6, 8}) {
              const gemv_config c{rpg, wpb, stages, split, gemv_kind::wgmma_pk};
              if (!gemv_config_supported(c, p.batch, p.n, p.k)) continue;
              check_config(p, c, ws.get());
              const gemv_config twin{rpg, wpb, 6, split, gemv_kind::wgmma_ws};
              if (gemv_config_supported(twin, p.batch, p.n, p.k)) {
                EXPECT_EQ(p.run(c, ws.get()), p.run(twin, ws.get()))
                    << name(c) << " on " << n << "x" << k << " batch " << batch;
                ++twins;
              }
              ++checked;
            }
      EXPECT_GE(checked, 15) << n << "x" << k << " batch " << batch; // 5 splits x 4, 6, 8 stages
      EXPECT_GE(twins, 5) << n << "x" << k << " batch " << batch;
    }
  for (int batch : {16, 128}) {
    problem qkv(batch, 6144, 2560), o_proj(batch, 2560, 4096), down(batch, 2560, 9728);
    for (const gemv_config c : {gemv_config{64, 4, 4, 4, gemv_kind::wgmma_pk},
                                gemv_config{64, 4, 6, 1, gemv_kind::wgmma_pk},
                                gemv_config{128, 4, 4, 2, gemv_kind::wgmma_pk}}) {
      check_then_repeat(qkv, c, 5);
      check_then_repeat(o_proj, c, 5);
      check_then_repeat(down, c, 5);
    }
  }
}

// The gemm family on the Qwen3-4B down projection's shape at the batches it is for, with the
// split-K finish under hundreds of racing blocks, repeated: one bit pattern.
// The split-K finish sums four rows at a time where n, the tile and the workspace allow it (n a
// multiple of 4) and one at a time otherwise: the same additions in the same order, so a row's
// bits must not depend on which. 516 rows take the quads (and a last 64-row tile of 4 rows),
// 517 rows -- the same 516 and one more -- the scalar finish; every split 2-8 of the ring
// families, batch tiles part filled and a second batch group (130), against the oracle too.
TEST(gpu_gemv, the_split_k_finish_by_quads_gives_the_scalar_finish_bits) {
  KG_REQUIRE_GPU();
  const int k = 8 * 1333;
  for (int batch : {13, 64, 130}) {
    problem quads(batch, 516, k, 77), scalar(batch, 517, k, 77);
    ASSERT_TRUE(std::equal(quads.w.begin(), quads.w.end(), scalar.w.begin()));
    device_buffer ws(gemv_workspace_bytes({1, 4, 2, 8}, batch, scalar.n, k));
    KG_CUDA_CHECK(cudaMemset(ws.get(), 0, ws.size()));
    int compared = 0;
    for (int split : {2, 3, 4, 8})
      for (const gemv_config c :
           {gemm_config(64, 4, 4, split, 1), gemv_config{64, 4, 3, split, gemv_kind::wgmma},
            gemv_config{128, 8, 4, split, gemv_kind::wgmma_tma},
            gemv_config{64, 4, 6, split, gemv_kind::wgmma_ws},
            gemv_config{64, 4, 6, split, gemv_kind::wgmma_pk}}) {
        if (!gemv_config_supported(c, batch, quads.n, k)) continue;
        check_config(quads, c, ws.get());
        const auto a = quads.run(c, ws.get()), b = scalar.run(c, ws.get());
        int differ = 0;
        for (int r = 0; r < batch; ++r)
          for (int i = 0; i < quads.n; ++i)
            differ += a[std::size_t(r) * quads.n + i] != b[std::size_t(r) * scalar.n + i];
        EXPECT_EQ(differ, 0) << name(c) << " batch " << batch << ": rows of 516 vs 517";
        ++compared;
      }
    EXPECT_GE(compared, 16) << "batch " << batch; // 4 splits x 4 or 5 families
  }
}

// The cluster finish of the wgmma_ws and wgmma_pk families (a tile's split blocks one cluster,
// their partials summed through distributed shared memory): against the oracle and repeated, and
// the bits of the same configuration's workspace finish -- every split (2, 3, 4 and 8 blocks a
// cluster, slices left empty at 7 k tiles), both block shapes, 516 rows (8-byte stores of 4
// outputs) and 517 (one store an output), batch tiles part filled and a second batch group (130);
// then the projections' shapes where the table's batch 64-128 rows split, repeated.
TEST(gpu_gemv, the_wgmma_cluster_finish_gives_the_workspace_finish_bits) {
  KG_REQUIRE_GPU();
  for (const auto& [n, k] :
       {std::pair{37, 8 * 53}, std::pair{516, 8 * 1333}, std::pair{517, 8 * 1333}})
    for (int batch : {1, 13, 64, 100, 128, 130}) {
      problem p(batch, n, k);
      device_buffer ws(gemv_workspace_bytes({1, 4, 2, 8}, p.batch, p.n, p.k));
      KG_CUDA_CHECK(cudaMemset(ws.get(), 0, ws.size()));
      int compared = 0;
      for (int split : {2, 3, 4, 8})
        for (const auto& [kind, stages] :
             {std::pair{gemv_kind::wgmma_ws, 6}, std::pair{gemv_kind::wgmma_ws, 8},
              std::pair{gemv_kind::wgmma_pk, 4}, std::pair{gemv_kind::wgmma_pk, 6}})
          for (int rpg : {64, 128})
            for (int wpb : {4, 8}) {
              const gemv_config workspace_finish{rpg, wpb, stages, split, kind};
              gemv_config c = workspace_finish;
              c.cluster = 1;
              if (!gemv_config_supported(c, p.batch, p.n, p.k)) continue;
              ASSERT_TRUE(gemv_config_supported(workspace_finish, p.batch, p.n, p.k)) << name(c);
              EXPECT_EQ(gemv_workspace_bytes(c, p.batch, p.n, p.k), 0u);
              check_config(p, c, nullptr);
              EXPECT_EQ(p.run(c, nullptr), p.run(workspace_finish, ws.get()))
                  << name(c) << " on " << n << "x" << k << " batch " << batch;
              ++compared;
            }
      EXPECT_GE(compared, 16) << n << "x" << k << " batch " << batch; // 4 splits x 4 rings
    }
  for (int batch : {64, 128}) {
    problem qkv(batch, 6144, 2560), o_proj(batch, 2560, 4096), down(batch, 2560, 9728);
    for (const gemv_config c : {gemv_config{64, 4, 8, 2, gemv_kind::wgmma_ws, 1},
                                gemv_config{64, 4, 6, 3, gemv_kind::wgmma_pk, 1},
                                gemv_config{128, 4, 4, 4, gemv_kind::wgmma_pk, 1}}) {
      check_then_repeat(qkv, c, 5);
      check_then_repeat(o_proj, c, 5);
      check_then_repeat(down, c, 5);
    }
  }
}

// The wgmma_sw family (the batch as the wgmma's M, 40 to 128 weight rows as its N): every
// configuration on odd shapes against the oracle -- rows past n in a part-filled last tile, k
// tiles part filled, batches part filling one or two m64 tiles and a second batch group (130) --
// and with split K the cluster finish's bits equal to the workspace finish's (516 rows: 8-byte
// stores of 4 outputs; 517: one store an output). Then the projections' shapes, repeated.
TEST(gpu_gemv, the_wgmma_sw_family_matches_the_oracle_and_its_finishes_agree) {
  KG_REQUIRE_GPU();
  for (const auto& [n, k] :
       {std::pair{37, 8 * 53}, std::pair{516, 8 * 1333}, std::pair{517, 8 * 1333}})
    for (int batch : {1, 13, 16, 33, 64, 100, 128, 130}) {
      problem p(batch, n, k);
      device_buffer ws(gemv_workspace_bytes({1, 4, 2, 8}, p.batch, p.n, p.k));
      KG_CUDA_CHECK(cudaMemset(ws.get(), 0, ws.size()));
      int checked = 0, compared = 0;
      for (int split : {1, 2, 3, 4, 8})
        for (int tn : {40, 48, 64, 80, 96, 128})
          for (int stages : {4, 6, 8}) {
            const gemv_config c{tn, 4, stages, split, gemv_kind::wgmma_sw};
            if (!gemv_config_supported(c, p.batch, p.n, p.k)) continue;
            check_config(p, c, ws.get());
            ++checked;
            gemv_config cl = c;
            cl.cluster = 1;
            if (split == 1 || !gemv_config_supported(cl, p.batch, p.n, p.k)) continue;
            EXPECT_EQ(p.run(cl, nullptr), p.run(c, ws.get()))
                << name(cl) << " on " << n << "x" << k << " batch " << batch;
            ++compared;
          }
      // 5 splits x 6 tiles x 3 stages, less 96 and 128 rows at 8 stages above batch 64
      EXPECT_GE(checked, batch > 64 ? 80 : 90) << n << "x" << k << " batch " << batch;
      EXPECT_GE(compared, batch > 64 ? 64 : 72) << n << "x" << k << " batch " << batch;
    }
  for (int batch : {16, 128}) {
    problem qkv(batch, 6144, 2560), o_proj(batch, 2560, 4096), down(batch, 2560, 9728);
    for (const gemv_config c : {gemv_config{48, 4, 6, 1, gemv_kind::wgmma_sw},
                                gemv_config{40, 4, 8, 2, gemv_kind::wgmma_sw, 1},
                                gemv_config{96, 4, 6, 2, gemv_kind::wgmma_sw, 1},
                                gemv_config{80, 4, 8, 4, gemv_kind::wgmma_sw, 1},
                                gemv_config{40, 4, 4, 3, gemv_kind::wgmma_sw}}) {
      check_then_repeat(qkv, c, 5);
      check_then_repeat(o_proj, c, 5);
      check_then_repeat(down, c, 5);
    }
  }
}

TEST(gpu_gemv, the_gemm_family_split_k_is_bitwise_repeatable_on_a_real_shape) {
  KG_REQUIRE_GPU();
  for (int batch : {32, 128}) {
    problem p(batch, 2560, 9728);
    for (const gemv_config c :
         {gemm_config(16, 8, 4, 4, 1), gemm_config(32, 8, 3, 8, 2), gemm_config(16, 4, 4, 2, 2)}) {
      if (!gemv_config_supported(c, batch, p.n, p.k)) continue;
      check_then_repeat(p, c, 10);
    }
  }
}

// The cluster finish adds the same slice sums in the same order as the workspace finish: the
// same bits, launch after launch, with thousands of clusters in flight.
TEST(gpu_gemv, the_cluster_finish_gives_the_workspace_finish_bits) {
  KG_REQUIRE_GPU();
  for (int batch : {1, 8}) {
    problem p(batch, 4099, 8 * 1216);
    for (const gemv_config c : {gemv_config{2, 4, 2, 2}, gemv_config{2, 8, 2, 4},
                                gemv_config{1, 4, 4, 2}, gemv_config{4, 8, 2, 8}}) {
      device_buffer ws(gemv_workspace_bytes(c, p.batch, p.n, p.k));
      KG_CUDA_CHECK(cudaMemset(ws.get(), 0, ws.size()));
      const auto want = p.run(c, ws.get());
      gemv_config cl = c;
      cl.cluster = 1;
      EXPECT_EQ(gemv_workspace_bytes(cl, p.batch, p.n, p.k), 0u);
      for (int i = 0; i < 5; ++i)
        ASSERT_EQ(p.run(cl, nullptr), want) << name(cl) << ", batch " << batch << ": run " << i + 1
                                            << " differs from the workspace finish";
    }
  }
}

// A programmatic launch (the decode step's) changes when a GEMV may start, never what it reads:
// chained behind a kernel that writes its x, every family gives the plain launch's bits. The
// producer here is another GEMV writing x (batch rows of the next one's input), so a GEMV that
// read x before its predecessor finished would see the poisoned (NaN) x of the previous round.
TEST(gpu_gemv, a_programmatic_launch_reads_x_only_after_the_kernel_ahead_has_written_it) {
  KG_REQUIRE_GPU();
  const int batch = 4, k = 8 * 160, n = 8 * 160; // y of the first is x of the second: n == k
  problem first(batch, n, 8 * 301), second(batch, 517, k);
  for (const gemv_config c :
       {gemv_config{2, 8, 2, 4}, gemv_config{1, 8, 4, 2, gemv_kind::simt, 1},
        gemv_config{16, 4, 2, 1, gemv_kind::mma}, gemv_config{16, 4, 2, 4, gemv_kind::mma},
        gemv_config{2, 16, 2, 1, gemv_kind::sweep}, gemv_config{2, 8, 2, 2, gemv_kind::bulk},
        gemv_config{1, 16, 1, 1, gemv_kind::tsweep}, gemv_config{2, 8, 2, 4, gemv_kind::tsweep},
        gemm_config(16, 8, 4, 1, 1), gemm_config(32, 4, 3, 4, 2)}) {
    device_buffer ws(std::max(gemv_workspace_bytes(c, batch, n, 8 * 301),
                              gemv_workspace_bytes(c, batch, 517, k)) +
                     16);
    KG_CUDA_CHECK(cudaMemset(ws.get(), 0, ws.size()));
    device_buffer y2(static_cast<std::size_t>(batch) * 517 * 2);
    std::vector<std::uint16_t> want;
    for (const bool programmatic : {false, true}) {
      cuda_stream s;
      for (int round = 0; round < 4; ++round) {
        // x of the second GEMV poisoned, then written by the first, then read by the second.
        KG_CUDA_CHECK(cudaMemsetAsync(second.dx.get(), 0xff, second.dx.size(), s.get()));
        ASSERT_EQ(launch_gemv_bf16(bf16(first.dx), bf16(first.dw), bf16(second.dx), batch, n,
                                   8 * 301, c, ws.get(), s.get(), programmatic),
                  cudaSuccess);
        ASSERT_EQ(launch_gemv_bf16(bf16(second.dx), bf16(second.dw), bf16(y2), batch, 517, k, c,
                                   ws.get(), s.get(), programmatic),
                  cudaSuccess);
      }
      KG_CUDA_CHECK(cudaStreamSynchronize(s.get()));
      std::vector<std::uint16_t> got(static_cast<std::size_t>(batch) * 517);
      KG_CUDA_CHECK(cudaMemcpy(got.data(), y2.get(), got.size() * 2, cudaMemcpyDeviceToHost));
      for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_FALSE(std::isnan(from_bf16_bits(got[i]))) << name(c) << ": y[" << i << "] is NaN";
      if (!programmatic)
        want = got;
      else
        EXPECT_EQ(got, want) << name(c) << ": programmatic launches changed the bits";
    }
  }
}

// The new families' split-K finish under thousands of racing blocks, repeated: one bit pattern.
// The grid never depends on the SM count, so this is also what a green-context partition gets.
TEST(gpu_gemv, bulk_and_mma_split_k_are_bitwise_repeatable_under_many_racing_blocks) {
  KG_REQUIRE_GPU();
  for (int batch : {1, 8}) {
    problem p(batch, 4099, 8 * 1216);
    for (const gemv_config c :
         {gemv_config{2, 8, 4, 8, gemv_kind::bulk}, gemv_config{1, 4, 8, 4, gemv_kind::bulk},
          gemv_config{16, 8, 4, 8, gemv_kind::mma}, gemv_config{16, 4, 2, 2, gemv_kind::mma}}) {
      check_then_repeat(p, c, 10);
    }
  }
}

// The gated epilogue (launch_gemv_bf16_gated) against the two launches it replaces: the GEMV
// into gate_up, then the SiLU-gate kernel; the same bits on the engine's gate_up shape (batch 1's
// folded simt row, the table's wgmma_pk rows at batch 1 and 64) and on odd ones (a pair count no
// block divides, partial k tiles, batches past a kernel's batch group of 16, part-filled wgmma
// batch tiles). wgmma_pk reads the paired copy, the plain GEMV the wgmma_tiles one.
TEST(gpu_gemv, the_gated_epilogue_gives_the_bits_of_the_gemv_then_the_silu_gate) {
  KG_REQUIRE_GPU();
  struct shape {
    int batch, n, k;
    std::vector<gemv_config> configs;
  };
  const auto pk = gemv_kind::wgmma_pk;
  const shape shapes[] = {
      {1,
       19456,
       2560,
       {*pick_gemv_config_folded(1, 19456, 2560, true), pick_gemv_config(1, 19456, 2560)}},
      {64, 19456, 2560, {pick_gemv_config(64, 19456, 2560)}},
      {3, 2 * 1001, 8 * 37, {{2, 4, 2, 1}, {2, 8, 4, 1}, {2, 16, 8, 1}}},
      {17, 2 * 333, 8 * 50, {{2, 4, 2, 1}}},
      {3, 2 * 1000, 8 * 37, {{64, 4, 4, 1, pk}, {128, 8, 6, 1, pk}, {64, 8, 8, 1, pk}}},
      {40, 2 * 1000, 8 * 37, {{64, 4, 4, 1, pk}, {128, 4, 4, 1, pk}}},
      {130, 2 * 72, 8 * 64, {{64, 4, 4, 1, pk}}}};
  for (const auto& sh : shapes) {
    problem p(sh.batch, sh.n, sh.k);
    const std::size_t half = std::size_t(sh.batch) * sh.n / 2;
    device_buffer a(half * 2), b(half * 2);
    device_buffer paired(gemv_packed_bytes(gemv_layout::wgmma_tiles_paired, sh.n, sh.k));
    if (paired.size())
      KG_CUDA_CHECK(pack_gemv_weights(gemv_layout::wgmma_tiles_paired, bf16(p.dw), bf16(paired),
                                      sh.n, sh.k, nullptr));
    for (const auto& c : sh.configs) {
      SCOPED_TRACE(name(c) + ", batch " + std::to_string(sh.batch) + ", n " + std::to_string(sh.n));
      ASSERT_TRUE(gemv_gated_supported(c, sh.batch, sh.n, sh.k));
      const bool pairs = gemv_gated_weight_layout(c) == gemv_layout::wgmma_tiles_paired;
      p.run(c, nullptr); // gate_up into p.dy
      KG_CUDA_CHECK(decode::launch_silu_gate_mul(bf16(p.dy), bf16(a), sh.batch, sh.n / 2, nullptr));
      KG_CUDA_CHECK(cudaMemset(b.get(), 0xff, b.size()));
      KG_CUDA_CHECK(launch_gemv_bf16_gated(bf16(p.dx), bf16(pairs ? paired : p.dw), bf16(b),
                                           sh.batch, sh.n, sh.k, c, nullptr));
      KG_CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<std::uint16_t> ya(half), yb(half);
      KG_CUDA_CHECK(cudaMemcpy(ya.data(), a.get(), half * 2, cudaMemcpyDeviceToHost));
      KG_CUDA_CHECK(cudaMemcpy(yb.data(), b.get(), half * 2, cudaMemcpyDeviceToHost));
      std::size_t diff = 0, first = half;
      for (std::size_t i = 0; i < half; ++i)
        if (ya[i] != yb[i] && diff++ == 0) first = i;
      EXPECT_EQ(diff, 0u) << diff << " of " << half << " outputs differ, the first at ("
                          << first / (sh.n / 2) << ", " << first % (sh.n / 2) << ")";
    }
  }
}
