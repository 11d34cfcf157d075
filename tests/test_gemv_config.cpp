// CPU side of the decode GEMV (kernels/decode/gemv_bf16.h): the configuration table covers every
// Qwen3-4B projection and batch with configurations the launch accepts, the workspace size
// follows the documented layout, and unsupported requests are refused before the device is
// touched (so these run without a GPU).
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/decode/gemv_bf16.h"
#include "kernels/decode/gemv_bf16_launch.h"
#include "workloads/qwen3.h"

using namespace kg;

namespace {

bool in(int v, std::initializer_list<int> set) {
  for (int s : set)
    if (v == s) return true;
  return false;
}

// Any non-null, 16-byte aligned address: the launch refuses before dereferencing anything.
template <typename T>
T* fake(std::uintptr_t a = 0x10000) {
  return reinterpret_cast<T*>(a);
}

} // namespace

TEST(gemv_config, picks_supported_configurations_for_every_qwen3_shape_and_batch) {
  for (const auto& g : decode_gemms())
    for (int batch = 1; batch <= 128; ++batch) { // the table's range
      const int n = static_cast<int>(g.n), k = static_cast<int>(g.k);
      const gemv_config c = pick_gemv_config(batch, n, k);
      SCOPED_TRACE(g.name + " batch " + std::to_string(batch) + " " + gemv_kind_name(c.kind));
      EXPECT_TRUE(in(c.split_k, {1, 2, 3, 4, 8}));
      switch (c.kind) {
      case gemv_kind::simt:
        EXPECT_TRUE(in(c.rows_per_warp, {1, 2, 4}));
        EXPECT_TRUE(in(c.unroll, {2, 4, 8}));
        EXPECT_TRUE(in(c.warps_per_block, {4, 8, 16}));
        EXPECT_LE(c.rows_per_warp * c.unroll, 16);
        break;
      case gemv_kind::bulk:
        EXPECT_TRUE(in(c.rows_per_warp, {1, 2, 4}));
        EXPECT_TRUE(in(c.unroll, {2, 4, 8}));
        EXPECT_TRUE(in(c.warps_per_block, {4, 8}));
        break;
      case gemv_kind::mma:
        EXPECT_EQ(c.rows_per_warp, 16);
        EXPECT_TRUE(in(c.unroll, {2, 4}));
        break;
      case gemv_kind::sweep: // one launch per 2 batch rows: only worth it at batch 1 and 2
        EXPECT_LE(batch, 2);
        EXPECT_EQ(c.split_k, 1);
        break;
      case gemv_kind::tsweep: // one launch per 8 batch rows
        EXPECT_LE(batch, 8);
        EXPECT_EQ(132 * c.rows_per_warp % c.split_k, 0);
        break;
      case gemv_kind::packed: // the engine keeps a packed copy of this weight
        EXPECT_EQ(c.rows_per_warp, 16);
        EXPECT_EQ(k % 64, 0);
        EXPECT_GT(gemv_packed_bytes(gemv_layout::packed, n, k), 0u);
        break;
      case gemv_kind::gemm:
        EXPECT_TRUE(in(c.rows_per_warp, {16, 32, 64}));
        EXPECT_TRUE(in(c.unroll, {3, 4}));
        break;
      case gemv_kind::wgmma:
      case gemv_kind::wgmma_tma:
        EXPECT_TRUE(in(c.rows_per_warp, {64, 128}));
        EXPECT_TRUE(in(c.unroll, {3, 4}));
        break;
      case gemv_kind::wgmma_ws:
        EXPECT_TRUE(in(c.rows_per_warp, {64, 128}));
        EXPECT_TRUE(in(c.unroll, {6, 8, 12, 16}));
        break;
      case gemv_kind::wgmma_pk: // the engine keeps a wgmma_tiles copy of this weight
        EXPECT_TRUE(in(c.rows_per_warp, {64, 128}));
        EXPECT_TRUE(in(c.unroll, {4, 6, 8}));
        EXPECT_GT(gemv_packed_bytes(gemv_layout::wgmma_tiles, n, k), 0u);
        break;
      case gemv_kind::wgmma_sw: // above batch 32 only: its x tile is padded to 64 rows
        EXPECT_TRUE(in(c.rows_per_warp, {40, 48, 64}));
        EXPECT_GT(batch, 32);
        break;
      }
      EXPECT_TRUE(gemv_config_supported(c, batch, n, k));
    }
}

TEST(gemv_config, falls_back_to_a_supported_configuration_for_other_shapes) {
  for (const auto& [n, k] : std::vector<std::pair<int, int>>{
           {1, 8}, {37, 424}, {4096, 4096}, {1000, 8 * 1001}, {300000, 512}, {65, 65536}})
    for (int batch : {1, 3, 8, 13, 32, 40}) {
      SCOPED_TRACE(std::to_string(n) + "x" + std::to_string(k) + " batch " + std::to_string(batch));
      EXPECT_TRUE(gemv_config_supported(pick_gemv_config(batch, n, k), batch, n, k));
    }
}

TEST(gemv_config, workspace_holds_the_counters_and_every_slice_of_partials) {
  for (const auto& g : decode_gemms())
    for (int batch = 1; batch <= 32; ++batch) {
      const int n = static_cast<int>(g.n), k = static_cast<int>(g.k);
      gemv_config c = pick_gemv_config(batch, n, k);
      for (int split : {1, 2, 4, 8}) {
        c.split_k = split;
        const std::size_t bytes = gemv_workspace_bytes(c, batch, n, k);
        if (split == 1) {
          EXPECT_EQ(bytes, 0u);
          continue;
        }
        const std::size_t partials = std::size_t(split) * batch * n * sizeof(float);
        EXPECT_GT(bytes, partials); // the per-tile counters come on top
        // K does not enter (partials are whole output rows), the batch does, monotonically.
        EXPECT_EQ(bytes, gemv_workspace_bytes(c, batch, n, k * 2));
        if (batch > 1) {
          EXPECT_GT(bytes, gemv_workspace_bytes(c, batch - 1, n, k));
        }
        // One workspace for several configurations: the size never depends on how rows are
        // grouped, only on what the partials hold.
        gemv_config other = c;
        other.rows_per_warp = c.rows_per_warp == 1 ? 2 : 1;
        other.warps_per_block = c.warps_per_block == 8 ? 16 : 8;
        EXPECT_EQ(bytes, gemv_workspace_bytes(other, batch, n, k));
      }
    }
}

TEST(gemv_config, unsupported_requests_return_invalid_value_without_touching_the_device) {
  const auto* x = fake<const __nv_bfloat16>();
  const auto* w = fake<const __nv_bfloat16>(0x20000);
  auto* y = fake<__nv_bfloat16>(0x30000);
  void* ws = fake<void>(0x40000);
  auto launch = [&](const gemv_config& c, int batch = 4, int n = 64, int k = 256,
                    const __nv_bfloat16* xp = nullptr) {
    return launch_gemv_bf16(xp ? xp : x, w, y, batch, n, k, c, ws, nullptr);
  };
  EXPECT_EQ(launch({3, 8, 2, 1}), cudaErrorInvalidValue);            // rows_per_warp 3
  EXPECT_EQ(launch({4, 8, 8, 1}), cudaErrorInvalidValue);            // 32 loads in flight per lane
  EXPECT_EQ(launch({1, 8, 1, 1}), cudaErrorInvalidValue);            // unroll 1
  EXPECT_EQ(launch({1, 32, 2, 1}), cudaErrorInvalidValue);           // 32 warps per block
  EXPECT_EQ(launch({1, 8, 2, 3}), cudaErrorInvalidValue);            // split 3
  EXPECT_EQ(launch({1, 8, 2, 16}), cudaErrorInvalidValue);           // split 16
  EXPECT_EQ(launch({1, 8, 2, 1}, 4, 64, 12), cudaErrorInvalidValue); // k % 8 != 0
  EXPECT_EQ(launch({1, 8, 2, 1}, 0), cudaErrorInvalidValue);         // batch 0
  EXPECT_EQ(launch({1, 8, 2, 1}, 4, 0), cudaErrorInvalidValue);      // n 0
  EXPECT_EQ(launch({1, 8, 2, 1}, 4, 64, 256, fake<const __nv_bfloat16>(0x10008)),
            cudaErrorInvalidValue); // x not 16-byte aligned
  EXPECT_EQ(launch_gemv_bf16(x, w, y, 4, 64, 256, {1, 8, 2, 2}, nullptr, nullptr),
            cudaErrorInvalidValue); // split K without a workspace
  // The bulk family: no 16 warps per block, stages 2, 4, 8, a ring of at most 96 KB.
  constexpr auto bulk = gemv_kind::bulk, mma = gemv_kind::mma;
  EXPECT_EQ(launch({1, 16, 4, 1, bulk}), cudaErrorInvalidValue);
  EXPECT_EQ(launch({1, 8, 3, 1, bulk}), cudaErrorInvalidValue);
  EXPECT_EQ(launch({1, 8, 16, 1, bulk}), cudaErrorInvalidValue);
  EXPECT_EQ(launch({3, 8, 4, 1, bulk}), cudaErrorInvalidValue);
  EXPECT_EQ(launch({2, 8, 8, 1, bulk}), cudaErrorInvalidValue); // 16 rows x 8 KB: 128 KB ring
  EXPECT_EQ(launch({4, 8, 4, 1, bulk}), cudaErrorInvalidValue); // 32 rows x 4 KB: 128 KB ring
  EXPECT_EQ(launch({1, 8, 4, 3, bulk}), cudaErrorInvalidValue);
  EXPECT_TRUE(gemv_config_supported({2, 8, 4, 8, bulk}, 4, 64, 256)); // 64 KB ring
  EXPECT_TRUE(gemv_config_supported({4, 8, 2, 1, bulk}, 32, 64, 256));
  // The mma family: 16 rows per warp tile, unroll 2 or 4, unroll x warps <= 32.
  EXPECT_EQ(launch({8, 8, 2, 1, mma}), cudaErrorInvalidValue);
  EXPECT_EQ(launch({16, 8, 8, 1, mma}), cudaErrorInvalidValue);
  EXPECT_EQ(launch({16, 16, 4, 1, mma}), cudaErrorInvalidValue);
  EXPECT_EQ(launch({16, 32, 1, 1, mma}), cudaErrorInvalidValue);
  EXPECT_EQ(launch({16, 8, 2, 16, mma}), cudaErrorInvalidValue);
  EXPECT_EQ(launch_gemv_bf16(x, w, y, 4, 64, 256, {16, 8, 2, 2, mma}, nullptr, nullptr),
            cudaErrorInvalidValue); // split K without a workspace
  EXPECT_TRUE(gemv_config_supported({16, 16, 2, 8, mma}, 32, 64, 256));
  EXPECT_TRUE(gemv_config_supported({16, 8, 4, 1, mma}, 1, 64, 256));
  // The cluster finish: 0 or 1, split K only, not the mma or bulk families (the wgmma_ws and
  // wgmma_pk ones below); it needs no workspace.
  EXPECT_EQ(launch({1, 8, 2, 2, gemv_kind::simt, 2}), cudaErrorInvalidValue);
  EXPECT_EQ(launch({1, 8, 2, 1, gemv_kind::simt, 1}), cudaErrorInvalidValue); // no split
  EXPECT_EQ(launch({1, 8, 4, 2, bulk, 1}), cudaErrorInvalidValue);
  EXPECT_TRUE(gemv_config_supported({1, 8, 2, 2, gemv_kind::simt, 1}, 4, 64, 256));
  EXPECT_FALSE(gemv_config_supported({16, 8, 2, 8, mma, 1}, 4, 64, 256));
  EXPECT_EQ(gemv_workspace_bytes({2, 8, 2, 8, gemv_kind::simt, 1}, 4, 64, 256), 0u);
  // The sweep family: a grid of 132 x 1..4 blocks; 1, 2 or 4 rows in flight; 8 or 16 warps; no
  // split; at most 8 chunks of a row per thread.
  constexpr auto sweep = gemv_kind::sweep;
  EXPECT_EQ(launch({5, 8, 2, 1, sweep}), cudaErrorInvalidValue);
  EXPECT_EQ(launch({2, 8, 3, 1, sweep}), cudaErrorInvalidValue);
  EXPECT_EQ(launch({2, 4, 2, 1, sweep}), cudaErrorInvalidValue);
  EXPECT_EQ(launch({2, 8, 2, 2, sweep}), cudaErrorInvalidValue);
  EXPECT_EQ(launch({2, 8, 2, 1, sweep, 1}), cudaErrorInvalidValue);
  EXPECT_TRUE(gemv_config_supported({2, 8, 4, 1, sweep}, 1, 64, 8 * 2048));   // 8 per thread
  EXPECT_FALSE(gemv_config_supported({2, 8, 4, 1, sweep}, 1, 64, 8 * 2049));  // 9 per thread
  EXPECT_TRUE(gemv_config_supported({4, 16, 1, 1, sweep}, 33, 64, 8 * 4096)); // 17 launches
  // The tile-sweep family: a grid of 132 x 1..4 blocks divisible by the split; 1 or 2 tiles in
  // flight; 4, 8 or 16 warps; N = ceil(slice chunks / (4 x warps)) <= 8 and unroll x N <= 8.
  constexpr auto tsweep = gemv_kind::tsweep;
  EXPECT_EQ(launch({5, 8, 1, 1, tsweep}), cudaErrorInvalidValue);
  EXPECT_EQ(launch({1, 8, 4, 1, tsweep}), cudaErrorInvalidValue);
  EXPECT_EQ(launch({1, 2, 1, 1, tsweep}), cudaErrorInvalidValue);
  EXPECT_EQ(launch({1, 8, 1, 8, tsweep}), cudaErrorInvalidValue);       // 132 blocks in 8 slices
  EXPECT_TRUE(gemv_config_supported({2, 8, 1, 8, tsweep}, 4, 64, 256)); // 264 of them
  EXPECT_EQ(launch({1, 8, 1, 2, tsweep, 1}), cudaErrorInvalidValue);
  // down (k / 8 = 1216): slices of 304 chunks over 16 warps are 4.75 -> 5 per lane; over 8
  // warps 9.5 -> 10 (too many); one slice over 16 warps 19.
  EXPECT_TRUE(gemv_config_supported({1, 16, 1, 4, tsweep}, 8, 2560, 9728));
  EXPECT_FALSE(gemv_config_supported({1, 16, 2, 4, tsweep}, 8, 2560, 9728)); // 2 x 5 > 8
  EXPECT_FALSE(gemv_config_supported({1, 8, 1, 4, tsweep}, 8, 2560, 9728));
  EXPECT_FALSE(gemv_config_supported({1, 16, 1, 1, tsweep}, 8, 2560, 9728));
  // qkv (k / 8 = 320) in one slice over 16 warps: 5 per lane, so one tile in flight only.
  EXPECT_TRUE(gemv_config_supported({1, 16, 1, 1, tsweep}, 8, 6144, 2560));
  EXPECT_FALSE(gemv_config_supported({1, 16, 2, 1, tsweep}, 8, 6144, 2560));
  // The packed family: the mma family's rules, K in whole 64-element steps.
  constexpr auto packed = gemv_kind::packed;
  EXPECT_TRUE(gemv_config_supported({16, 8, 2, 4, packed}, 8, 2560, 9728));
  EXPECT_TRUE(gemv_config_supported({16, 16, 2, 8, packed}, 32, 64, 256));
  EXPECT_EQ(launch({16, 8, 2, 1, packed}, 4, 64, 192 + 8), cudaErrorInvalidValue); // k % 64
  EXPECT_EQ(launch({16, 16, 4, 1, packed}), cudaErrorInvalidValue);
  EXPECT_EQ(launch({8, 8, 2, 1, packed}), cudaErrorInvalidValue);
  EXPECT_EQ(launch({16, 8, 2, 2, packed, 1}), cudaErrorInvalidValue); // no cluster finish
  EXPECT_EQ(launch_gemv_bf16(x, w, y, 4, 64, 256, {16, 8, 2, 2, packed}, nullptr, nullptr),
            cudaErrorInvalidValue); // split K without a workspace
  // An unknown kind.
  EXPECT_EQ(launch({1, 8, 2, 1, static_cast<gemv_kind>(7)}), cudaErrorInvalidValue);
  // More than 65536 row tiles cannot split K (the counters have a fixed place and size).
  EXPECT_FALSE(gemv_config_supported({1, 4, 2, 2}, 1, 4 * 65536 + 1, 256));
  EXPECT_TRUE(gemv_config_supported({1, 4, 2, 1}, 1, 4 * 65536 + 1, 256));
  EXPECT_FALSE(gemv_config_supported({16, 8, 2, 2, mma}, 1, 16 * 65536 + 1, 256));
  EXPECT_TRUE(gemv_config_supported({16, 8, 2, 2, mma}, 1, 16 * 65536, 256));
}

// The gemm family's rules (gemv_bf16.h), each limit worked out by hand: a warp's m16n8 tiles =
// rows_per_warp / 16 x batch tile / (8 x batch_warps) <= 16, the batch tile the group's batch
// rounded up to a power of two (at least 16 x batch_warps), at most 256 rows a block, and a ring
// of stages x (rows + batch tile) x 128 bytes <= 200 KB.
TEST(gemv_config, the_gemm_family_keeps_its_tiles_in_registers_and_its_ring_in_shared_memory) {
  constexpr auto gemm = gemv_kind::gemm;
  auto ok = [](int rpw, int wpb, int stages, int split, int bw, int batch, int n = 2560,
               int k = 9728) {
    gemv_config c{rpw, wpb, stages, split, gemm};
    c.batch_warps = bw;
    return gemv_config_supported(c, batch, n, k);
  };
  // Batch 128, one warp across: 16 rows x 128 columns = 16 tiles; 32 rows would be 32.
  EXPECT_TRUE(ok(16, 8, 4, 1, 1, 128));  // 128 rows: 4 x 256 rows x 128 B = 128 KB
  EXPECT_FALSE(ok(32, 8, 4, 1, 1, 128)); // 32 tiles
  EXPECT_TRUE(ok(32, 8, 4, 1, 2, 128));  // two warps across: 2 x 8 = 16 tiles, 128 rows
  EXPECT_FALSE(ok(64, 8, 4, 1, 2, 128)); // 4 x 8 = 32 tiles
  // Batch 100 rounds to 128; batch 130 is a group of 128 and one of 2 (rounded to 16).
  EXPECT_FALSE(ok(32, 4, 3, 1, 1, 100));
  EXPECT_FALSE(ok(32, 4, 3, 1, 1, 130));
  EXPECT_TRUE(ok(32, 4, 3, 1, 1, 64)); // 2 x 8 tiles
  // Rows: 64 x 8 = 512 rows a block is too many; 64 x 4 = 256 fits (batch 16: 4 x 2 tiles, a
  // ring of 4 x (256 + 16) x 128 B = 136 KB).
  EXPECT_FALSE(ok(64, 8, 4, 1, 1, 16));
  EXPECT_TRUE(ok(64, 4, 4, 1, 1, 16));
  // The largest ring the tile limits leave: 64 x 8 / 2 = 256 rows with a batch tile of 64 at 4
  // stages, 4 x 320 x 128 B = 160 KB (the 200 KB limit never binds before the others).
  EXPECT_TRUE(ok(64, 8, 4, 1, 2, 64));
  EXPECT_TRUE(ok(32, 8, 4, 1, 1, 16));
  // Other fields: stages 3 or 4, warps 4 or 8, batch_warps 1 or 2 (only here), no cluster.
  EXPECT_FALSE(ok(16, 8, 2, 1, 1, 32));
  EXPECT_FALSE(ok(16, 16, 4, 1, 1, 32));
  EXPECT_FALSE(ok(16, 8, 4, 1, 3, 32));
  EXPECT_FALSE(ok(16, 8, 4, 5, 1, 32));
  EXPECT_FALSE(ok(8, 8, 4, 1, 1, 32));
  EXPECT_FALSE(gemv_config_supported({16, 8, 4, 2, gemm, 1}, 32, 2560, 9728));
  gemv_config simt{1, 8, 2, 1};
  simt.batch_warps = 2;
  EXPECT_FALSE(gemv_config_supported(simt, 4, 64, 256));
  // Any k % 8 == 0 (a partial last k tile is zero-filled) and any n, batch.
  EXPECT_TRUE(ok(16, 4, 3, 8, 1, 1, 37, 8 * 53));
  EXPECT_TRUE(ok(32, 8, 3, 4, 2, 333, 517, 8 * 1333));
  // The batch group: 128 rows; the workspace is every family's.
  EXPECT_EQ(gemv_batch_group({16, 8, 4, 1, gemm}), 128);
  for (int split : {2, 4, 8})
    EXPECT_EQ(gemv_workspace_bytes({16, 8, 4, split, gemm}, 64, 2560, 9728),
              gemv_workspace_bytes({1, 8, 2, split}, 64, 2560, 9728));
  EXPECT_STREQ(gemv_kind_name(gemm), "gemm");
}

// The wgmma families' rules (gemv_bf16.h; wgmma_tma has wgmma's), each limit worked out by hand: a
// thread's accumulators = rows_per_warp / 64 x batch tile / 2 <= 128, at most 256 rows a block
// (rows_per_warp x warps_per_block / 4), a ring of stages x (rows + batch tile) x 128 bytes + 1 KB
// <= 201 KB.
TEST(gemv_config, the_wgmma_families_keep_their_accumulators_and_ring_in_bounds) {
  for (const gemv_kind wgmma : {gemv_kind::wgmma, gemv_kind::wgmma_tma}) {
    SCOPED_TRACE(gemv_kind_name(wgmma));
    auto ok = [wgmma](int rpg, int wpb, int stages, int split, int batch, int n = 2560,
                      int k = 9728) {
      return gemv_config_supported({rpg, wpb, stages, split, wgmma}, batch, n, k);
    };
    // Batch 128: 128 rows a warpgroup is 2 x 64 = 128 accumulators, two warpgroups 256 rows, a
    // ring of 4 x (256 + 128) x 128 B + 1 KB = 193 KB.
    EXPECT_TRUE(ok(128, 8, 4, 1, 128));
    EXPECT_TRUE(ok(64, 4, 3, 1, 128));
    // Batch 100 and 130 take the 128 tile too; 16 is the least tile (batch 1).
    EXPECT_TRUE(ok(128, 8, 4, 2, 100));
    EXPECT_TRUE(ok(128, 8, 3, 8, 130));
    EXPECT_TRUE(ok(64, 4, 4, 1, 1, 37, 8 * 53));
    // Other fields: rows 64 or 128, warps 4 or 8, stages 3 or 4, batch_warps 1, no cluster.
    EXPECT_FALSE(ok(32, 4, 4, 1, 32));
    EXPECT_FALSE(ok(256, 4, 4, 1, 32));
    EXPECT_FALSE(ok(64, 16, 4, 1, 32));
    EXPECT_FALSE(ok(64, 4, 2, 1, 32));
    EXPECT_FALSE(ok(64, 4, 4, 5, 32));
    gemv_config bw{64, 4, 4, 1, wgmma};
    bw.batch_warps = 2;
    EXPECT_FALSE(gemv_config_supported(bw, 32, 2560, 9728));
    EXPECT_FALSE(gemv_config_supported({64, 4, 4, 2, wgmma, 1}, 32, 2560, 9728));
    EXPECT_EQ(gemv_batch_group({64, 4, 4, 1, wgmma}), 128);
    for (int split : {2, 4, 8})
      EXPECT_EQ(gemv_workspace_bytes({64, 4, 4, split, wgmma}, 64, 2560, 9728),
                gemv_workspace_bytes({1, 8, 2, split}, 64, 2560, 9728));
  }
  EXPECT_STREQ(gemv_kind_name(gemv_kind::wgmma), "wgmma");
  EXPECT_STREQ(gemv_kind_name(gemv_kind::wgmma_tma), "wgmma_tma");
}

// The wgmma_ws family's rules (gemv_bf16.h): wgmma's accumulators and rows, stages 6, 8, 12 or
// 16, and a ring of stages x (rows + batch tile) x 128 bytes + 1 KB <= 217 KB, worked by hand.
TEST(gemv_config, the_wgmma_ws_family_keeps_its_deep_ring_in_bounds) {
  auto ok = [](int rpg, int wpb, int stages, int split, int batch, int n = 6144, int k = 2560) {
    return gemv_config_supported({rpg, wpb, stages, split, gemv_kind::wgmma_ws}, batch, n, k);
  };
  // Batch 16 (tile 16): 16 x (64 + 16) x 128 B + 1 KB = 161 KB.
  EXPECT_TRUE(ok(64, 4, 16, 1, 16));
  // Batch 32: 16 x 96 x 128 B + 1 KB = 193 KB; batch 64: 16 x 128 x 128 B + 1 KB = 257 KB, no;
  // 12 x 128 x 128 B + 1 KB = 193 KB, yes.
  EXPECT_TRUE(ok(64, 4, 16, 1, 32));
  EXPECT_FALSE(ok(64, 4, 16, 1, 64));
  EXPECT_TRUE(ok(64, 4, 12, 1, 64));
  // Batch 128: 8 x 192 x 128 B + 1 KB = 193 KB; 12 x 192 x 128 B + 1 KB = 289 KB, no.
  EXPECT_TRUE(ok(64, 4, 8, 2, 128));
  EXPECT_FALSE(ok(64, 4, 12, 1, 128));
  // Two warpgroups of 128 rows (256 rows) at batch 16: 6 x 272 x 128 B + 1 KB = 205 KB, yes;
  // 8 stages 273 KB, no.
  EXPECT_TRUE(ok(128, 8, 6, 1, 16));
  EXPECT_FALSE(ok(128, 8, 8, 1, 16));
  // 3 and 4 stages are the other wgmma families', 10 and 32 nobody's; 16 warps: no.
  EXPECT_FALSE(ok(64, 4, 4, 1, 16));
  EXPECT_FALSE(ok(64, 4, 10, 1, 16));
  EXPECT_FALSE(ok(64, 4, 32, 1, 16));
  EXPECT_FALSE(ok(64, 16, 8, 1, 16));
  // The cluster finish (a tile's split blocks one cluster, the partials in their rings): split
  // K only, at most 8 blocks a cluster as every split; no workspace.
  for (int split : {2, 3, 4, 8})
    EXPECT_TRUE(gemv_config_supported({64, 4, 8, split, gemv_kind::wgmma_ws, 1}, 16, 6144, 2560));
  EXPECT_FALSE(gemv_config_supported({64, 4, 8, 1, gemv_kind::wgmma_ws, 1}, 16, 6144, 2560));
  EXPECT_FALSE(gemv_config_supported({64, 4, 8, 2, gemv_kind::wgmma_ws, 2}, 16, 6144, 2560));
  EXPECT_EQ(gemv_workspace_bytes({64, 4, 8, 2, gemv_kind::wgmma_ws, 1}, 128, 6144, 2560), 0u);
  EXPECT_EQ(gemv_batch_group({64, 4, 8, 1, gemv_kind::wgmma_ws}), 128);
  for (int split : {2, 4, 8})
    EXPECT_EQ(gemv_workspace_bytes({64, 4, 8, split, gemv_kind::wgmma_ws}, 64, 2560, 9728),
              gemv_workspace_bytes({1, 8, 2, split}, 64, 2560, 9728));
  EXPECT_STREQ(gemv_kind_name(gemv_kind::wgmma_ws), "wgmma_ws");
}

// The wgmma_pk family's rules: wgmma_ws's tiles and ring limit, stages 4, 6, 8, any split.
TEST(gemv_config, the_wgmma_pk_family_takes_the_wgmma_ws_tiles_with_shallower_rings) {
  auto ok = [](int rpg, int wpb, int stages, int split, int batch, int k = 4096) {
    return gemv_config_supported({rpg, wpb, stages, split, gemv_kind::wgmma_pk}, batch, 2560, k);
  };
  EXPECT_TRUE(ok(64, 4, 4, 1, 16));
  EXPECT_TRUE(ok(64, 4, 6, 4, 16));
  EXPECT_TRUE(ok(64, 4, 8, 8, 128));  // 8 x (64 + 128) x 128 B + 1 KB = 193 KB
  EXPECT_TRUE(ok(128, 8, 6, 2, 16));  // 6 x (256 + 16) x 128 B + 1 KB = 205 KB
  EXPECT_FALSE(ok(128, 8, 8, 2, 16)); // 273 KB
  EXPECT_FALSE(ok(64, 4, 12, 1, 16)); // the deep rings are wgmma_ws's
  EXPECT_FALSE(ok(64, 4, 3, 1, 16));
  EXPECT_TRUE(ok(64, 4, 6, 1, 16, 8 * 53)); // any k % 8 == 0: the copy pads the last k tile
  // The cluster finish as wgmma_ws's, with the shallow rings too: the partials of 256 rows x 128
  // batch columns (128 x 260 x 4 B = 130 KB) fit 4 stages (4 x 384 x 128 B = 192 KB).
  EXPECT_TRUE(gemv_config_supported({64, 4, 6, 2, gemv_kind::wgmma_pk, 1}, 16, 2560, 4096));
  EXPECT_TRUE(gemv_config_supported({128, 8, 4, 8, gemv_kind::wgmma_pk, 1}, 128, 2560, 4096));
  EXPECT_FALSE(gemv_config_supported({64, 4, 6, 1, gemv_kind::wgmma_pk, 1}, 16, 2560, 4096));
  EXPECT_EQ(gemv_workspace_bytes({64, 4, 4, 3, gemv_kind::wgmma_pk, 1}, 64, 2560, 4096), 0u);
  EXPECT_EQ(gemv_batch_group({64, 4, 4, 4, gemv_kind::wgmma_pk}), 128);
  EXPECT_EQ(gemv_workspace_bytes({64, 4, 4, 4, gemv_kind::wgmma_pk}, 64, 2560, 4096),
            gemv_workspace_bytes({1, 8, 2, 4}, 64, 2560, 4096));
  EXPECT_STREQ(gemv_kind_name(gemv_kind::wgmma_pk), "wgmma_pk");
  EXPECT_EQ(gemv_weight_layout({64, 4, 6, 1, gemv_kind::wgmma_pk}), gemv_layout::wgmma_tiles);
  EXPECT_EQ(gemv_weight_layout({64, 4, 6, 1, gemv_kind::wgmma_ws}), gemv_layout::row_major);
  EXPECT_TRUE(gemv_reads_packed({64, 4, 6, 1, gemv_kind::wgmma_pk}));
}

// The wgmma_sw family's rules: 40, 48, 64, 80, 96 or 128 weight rows a block, one consumer
// warpgroup, stages 4, 6, 8 where the ring fits 217 KB with the x tile padded to 64 or 128 rows
// (by hand: 8 x (64 + 128) x 128 B + 1 KB = 197,632 bytes fits; 8 x (96 + 128) x 128 B + 1 KB =
// 230,400 and 8 x (128 + 128) x 128 B + 1 KB do not, so 96 and 128 rows take 4 or 6 stages above
// a batch of 64; 8 x (80 + 128) x 128 B + 1 KB = 214,016 fits), any split and either finish; a
// block of tn rows, so 6144 rows are 128 blocks of 48.
TEST(gemv_config, the_wgmma_sw_family_takes_40_to_128_rows_and_the_batch_as_m) {
  auto ok = [](int tn, int wpb, int stages, int split, int batch, int cluster = 0) {
    return gemv_config_supported({tn, wpb, stages, split, gemv_kind::wgmma_sw, cluster}, batch,
                                 6144, 2560);
  };
  for (int tn : {40, 48, 64, 80, 96, 128})
    for (int stages : {4, 6, 8})
      for (int split : {1, 2, 3, 4, 8})
        for (int batch : {1, 16, 64, 65, 128, 300}) {
          const bool fits = stages < 8 || tn <= 80 || batch <= 64;
          EXPECT_EQ(ok(tn, 4, stages, split, batch), fits) << tn << " " << stages << " " << split;
          EXPECT_EQ(ok(tn, 4, stages, split, batch, 1), fits && split > 1);
        }
  EXPECT_FALSE(ok(112, 4, 6, 1, 16));
  EXPECT_FALSE(ok(256, 4, 4, 1, 16));
  EXPECT_FALSE(ok(32, 4, 6, 1, 16));
  EXPECT_FALSE(ok(48, 8, 6, 1, 16)); // one consumer warpgroup
  EXPECT_FALSE(ok(48, 4, 3, 1, 16));
  EXPECT_FALSE(ok(48, 4, 12, 1, 16));
  EXPECT_TRUE(gemv_config_supported({48, 4, 6, 1, gemv_kind::wgmma_sw}, 7, 37, 8 * 53));
  EXPECT_EQ(gemv_batch_group({48, 4, 6, 1, gemv_kind::wgmma_sw}), 128);
  EXPECT_EQ(gemv_workspace_bytes({40, 4, 6, 2, gemv_kind::wgmma_sw, 1}, 64, 2560, 4096), 0u);
  EXPECT_EQ(gemv_workspace_bytes({40, 4, 6, 2, gemv_kind::wgmma_sw}, 64, 2560, 4096),
            gemv_workspace_bytes({1, 8, 2, 2}, 64, 2560, 4096));
  EXPECT_EQ(gemv_weight_layout({48, 4, 6, 1, gemv_kind::wgmma_sw}), gemv_layout::row_major);
  EXPECT_STREQ(gemv_kind_name(gemv_kind::wgmma_sw), "wgmma_sw");
}

// The workspace layout is the same for every family: one zero-filled workspace serves them all.
// Split 3 (a 40-tile projection as 120 blocks) where K slices are whole k tiles: the gemm and
// wgmma families; the others cut K into even chunk counts and keep 1, 2, 4, 8.
TEST(gemv_config, split_3_is_offered_by_the_ring_families_only) {
  const int batch = 64, n = 2560, k = 4096;
  for (const gemv_kind kind :
       {gemv_kind::wgmma, gemv_kind::wgmma_tma, gemv_kind::wgmma_ws, gemv_kind::wgmma_pk}) {
    const gemv_config c{64, 4,
                        kind == gemv_kind::wgmma_ws   ? 6
                        : kind == gemv_kind::wgmma_pk ? 4
                                                      : 3,
                        3, kind};
    EXPECT_TRUE(gemv_config_supported(c, batch, n, k)) << gemv_kind_name(kind);
    EXPECT_EQ(gemv_workspace_bytes(c, batch, n, k),
              gemv_workspace_bytes({1, 4, 2, 2}, batch, n, k) +
                  std::size_t(batch) * n * sizeof(float)); // one slice more than split 2
  }
  gemv_config g{16, 4, 3, 3, gemv_kind::gemm};
  EXPECT_TRUE(gemv_config_supported(g, batch, n, k));
  for (const gemv_config c :
       {gemv_config{2, 8, 2, 3, gemv_kind::simt}, gemv_config{2, 8, 2, 3, gemv_kind::bulk},
        gemv_config{16, 8, 2, 3, gemv_kind::mma}, gemv_config{16, 8, 2, 3, gemv_kind::packed},
        gemv_config{1, 8, 1, 3, gemv_kind::tsweep}, gemv_config{64, 4, 3, 5, gemv_kind::wgmma},
        gemv_config{64, 4, 3, 6, gemv_kind::wgmma}})
    EXPECT_FALSE(gemv_config_supported(c, 8, n, k))
        << gemv_kind_name(c.kind) << " split " << c.split_k;
}

TEST(gemv_config, new_families_need_the_same_workspace_as_simt) {
  for (int split : {1, 2, 4, 8})
    for (int batch : {1, 3, 8, 32}) {
      const std::size_t simt = gemv_workspace_bytes({1, 8, 2, split}, batch, 2560, 9728);
      EXPECT_EQ(gemv_workspace_bytes({2, 8, 4, split, gemv_kind::bulk}, batch, 2560, 9728), simt);
      EXPECT_EQ(gemv_workspace_bytes({16, 8, 4, split, gemv_kind::mma}, batch, 2560, 9728), simt);
      EXPECT_EQ(gemv_workspace_bytes({16, 8, 4, split, gemv_kind::packed}, batch, 2560, 9728),
                simt);
    }
}

// The packed copy's size (whole 16-row tiles, rows past n zero-filled) and its refusals, by hand.
TEST(gemv_config, the_packed_copy_has_whole_tiles_and_needs_k_in_whole_steps) {
  constexpr auto packed = gemv_layout::packed;
  EXPECT_EQ(gemv_packed_bytes(packed, 2560, 9728), std::size_t{2560} * 9728 * 2); // 160 tiles
  EXPECT_EQ(gemv_packed_bytes(packed, 37, 448), std::size_t{48} * 448 * 2);       // 11 rows zero
  EXPECT_EQ(gemv_packed_bytes(packed, 16, 64), std::size_t{2048});                // one step: 2 KB
  EXPECT_EQ(gemv_packed_bytes(packed, 37, 424), 0u);                              // 424 = 6.6 steps
  EXPECT_EQ(gemv_packed_bytes(packed, 0, 64), 0u);
  EXPECT_EQ(gemv_packed_bytes(gemv_layout::row_major, 2560, 9728), 0u);
  EXPECT_TRUE(gemv_reads_packed({16, 8, 2, 1, gemv_kind::packed}));
  EXPECT_FALSE(gemv_reads_packed({16, 8, 2, 1, gemv_kind::mma}));
  const auto* w = fake<const __nv_bfloat16>(0x20000);
  auto* out = fake<__nv_bfloat16>(0x30000);
  EXPECT_EQ(pack_gemv_weights(packed, w, out, 37, 424, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(pack_gemv_weights(packed, w, fake<__nv_bfloat16>(0x30008), 37, 448, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(pack_gemv_weights(packed, nullptr, out, 37, 448, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(pack_gemv_weights(gemv_layout::row_major, w, out, 37, 448, nullptr),
            cudaErrorInvalidValue);
}

// The wgmma_tiles copy's size, by hand: rows up to a multiple of 256 (a block's most rows), k up
// to whole 64-column k tiles; and its refusals.
TEST(gemv_config, the_wgmma_tiles_copy_pads_rows_to_256_and_k_to_whole_tiles) {
  constexpr auto tiles = gemv_layout::wgmma_tiles;
  EXPECT_EQ(gemv_packed_bytes(tiles, 6144, 2560), std::size_t{6144} * 2560 * 2); // 24 x 256 rows
  EXPECT_EQ(gemv_packed_bytes(tiles, 2560, 9728), std::size_t{2560} * 9728 * 2);
  // lm_head: 151936 = 593.5 x 256 -> 594 x 256 = 152064 rows.
  EXPECT_EQ(gemv_packed_bytes(tiles, 151936, 2560), std::size_t{152064} * 2560 * 2);
  // 37 x 424: 256 rows x 448 columns (7 k tiles, the last one 40 columns of data).
  EXPECT_EQ(gemv_packed_bytes(tiles, 37, 424), std::size_t{256} * 448 * 2);
  EXPECT_EQ(gemv_packed_bytes(tiles, 37, 420), 0u); // k % 8 != 0
  EXPECT_EQ(gemv_packed_bytes(tiles, 0, 64), 0u);
  const auto* w = fake<const __nv_bfloat16>(0x20000);
  EXPECT_EQ(pack_gemv_weights(tiles, w, fake<__nv_bfloat16>(0x30008), 37, 424, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(pack_gemv_weights(tiles, w, fake<__nv_bfloat16>(0x30000), 37, 420, nullptr),
            cudaErrorInvalidValue);
}

// The gated epilogue exists where a gate row's sum and its up row's meet whole: simt at two rows a
// warp (n even), wgmma_pk over the paired copy (n % 16 == 0), no split; anything else is refused
// before the device is touched.
TEST(gemv_config, the_gated_epilogue_is_offered_only_where_one_thread_holds_both_sums) {
  const auto mma = gemv_kind::mma, sweep = gemv_kind::sweep;
  EXPECT_TRUE(gemv_gated_supported({2, 4, 2, 1}, 1, 19456, 2560));
  EXPECT_TRUE(gemv_gated_supported({2, 16, 8, 1}, 17, 2002, 296));
  EXPECT_FALSE(gemv_gated_supported({1, 4, 2, 1}, 1, 19456, 2560)); // one row a warp
  EXPECT_FALSE(gemv_gated_supported({4, 4, 2, 1}, 1, 19456, 2560));
  EXPECT_FALSE(gemv_gated_supported({2, 4, 2, 2}, 1, 19456, 2560)); // split K
  EXPECT_FALSE(gemv_gated_supported({2, 4, 2, 2, gemv_kind::simt, 1}, 1, 19456, 2560));
  EXPECT_FALSE(gemv_gated_supported({16, 4, 2, 1, mma}, 1, 19456, 2560));
  EXPECT_FALSE(gemv_gated_supported({2, 8, 2, 1, sweep}, 1, 19456, 2560));
  EXPECT_FALSE(gemv_gated_supported({2, 4, 2, 1}, 1, 19455, 2560)); // odd n
  EXPECT_FALSE(gemv_gated_supported({2, 4, 2, 1}, 1, 19456, 2561)); // k % 8
  const auto pk = gemv_kind::wgmma_pk;
  EXPECT_TRUE(gemv_gated_supported({128, 8, 4, 1, pk}, 1, 19456, 2560));
  EXPECT_TRUE(gemv_gated_supported({64, 4, 4, 1, pk}, 40, 2000, 296));
  EXPECT_FALSE(gemv_gated_supported({64, 4, 4, 1, pk}, 3, 2008, 296)); // n % 16
  EXPECT_FALSE(gemv_gated_supported({64, 4, 4, 2, pk}, 3, 2000, 296)); // split K
  EXPECT_FALSE(gemv_gated_supported({64, 4, 4, 2, pk, 1}, 3, 2000, 296));
  EXPECT_FALSE(gemv_gated_supported({64, 4, 4, 1, gemv_kind::wgmma_ws}, 3, 2000, 296));
  EXPECT_FALSE(gemv_gated_supported({48, 4, 4, 1, gemv_kind::wgmma_sw}, 3, 2000, 296));
  // Each gated configuration's weights: the paired copy for wgmma_pk, row-major for simt.
  EXPECT_EQ(gemv_gated_weight_layout({64, 4, 4, 1, pk}), gemv_layout::wgmma_tiles_paired);
  EXPECT_EQ(gemv_gated_weight_layout({2, 4, 2, 1}), gemv_layout::row_major);
  // The engine's gate_up rows at batch 1-64 are gated: their SiLU-gate kernel is gone from the
  // step; with the post norm folded, batch 1's simt row.
  ASSERT_TRUE(pick_gemv_config_folded(1, 19456, 2560, true).has_value());
  EXPECT_TRUE(gemv_gated_supported(*pick_gemv_config_folded(1, 19456, 2560, true), 1, 19456, 2560));
  for (const int b : {1, 2, 4, 8, 16, 32, 64})
    EXPECT_TRUE(gemv_gated_supported(pick_gemv_config(b, 19456, 2560), b, 19456, 2560)) << b;
  std::uint16_t buf[8] = {};
  auto* p = reinterpret_cast<__nv_bfloat16*>(buf);
  EXPECT_EQ(launch_gemv_bf16_gated(p, p, p, 1, 64, 8, {16, 4, 2, 1, mma}, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(launch_gemv_bf16_gated(p, p, p, 1, 63, 8, {2, 4, 2, 1}, nullptr),
            cudaErrorInvalidValue);
}

// The norm folds into the simt family (its x chunks pass through registers one at a time) and up
// to launch_add_rmsnorm's 8192 columns; the residual add into every family's store, not the
// gated one's (whose outputs are not the projection's). At batch 1 the engine's qkv, gate_up and
// lm_head rows take the norm: its three norm kernels a step leave the step's path.
TEST(gemv_config, a_norm_folds_into_the_simt_family_and_the_residual_add_into_every_family) {
  alignas(16) std::uint16_t buf[8] = {};
  auto* p = reinterpret_cast<__nv_bfloat16*>(buf);
  gemv_fusion norm, add;
  norm.norm_weight = p;
  add.add_to_y = true;
  for (const gemv_config& c : {gemv_config{2, 4, 2, 1}, gemv_config{4, 8, 2, 8},
                               gemv_config{1, 8, 4, 2, gemv_kind::simt, 1}}) {
    EXPECT_TRUE(gemv_fusion_supported(c, norm, 2560, false));
    EXPECT_TRUE(gemv_fusion_supported(c, norm, 8192, true));
    EXPECT_FALSE(gemv_fusion_supported(c, norm, 8200, false)); // past the norm kernel's rows
  }
  for (const auto kind :
       {gemv_kind::bulk, gemv_kind::mma, gemv_kind::sweep, gemv_kind::tsweep, gemv_kind::packed,
        gemv_kind::gemm, gemv_kind::wgmma, gemv_kind::wgmma_tma, gemv_kind::wgmma_ws,
        gemv_kind::wgmma_pk, gemv_kind::wgmma_sw}) {
    gemv_config c;
    c.kind = kind;
    EXPECT_FALSE(gemv_fusion_supported(c, norm, 2560, false)) << gemv_kind_name(kind);
    EXPECT_TRUE(gemv_fusion_supported(c, add, 2560, false)) << gemv_kind_name(kind);
  }
  EXPECT_FALSE(gemv_fusion_supported(gemv_config{2, 4, 2, 1}, add, 2560, true));
  EXPECT_TRUE(gemv_fusion_supported(gemv_config{2, 4, 2, 1}, gemv_fusion{}, 2560, true));
  // The engine's batch-1 folds: qkv and gate_up (gated) run the step's simt rows
  // where the table's are packed and wgmma_pk, lm_head its table row (simt); none from batch 2,
  // where every row is a tensor-core family's and no simt row was measured.
  for (const auto& [n, gated] : {std::pair{6144, false}, {19456, true}, {151936, false}}) {
    const auto c = pick_gemv_config_folded(1, n, 2560, gated);
    ASSERT_TRUE(c.has_value()) << n;
    EXPECT_TRUE(gemv_fusion_supported(*c, norm, 2560, gated)) << n;
    EXPECT_EQ(c->kind, gemv_kind::simt) << n;
    EXPECT_FALSE(pick_gemv_config_folded(2, n, 2560, gated).has_value()) << n;
  }
  EXPECT_EQ(pick_gemv_config(1, 6144, 2560).kind, gemv_kind::packed);
  EXPECT_EQ(pick_gemv_config(1, 19456, 2560).kind, gemv_kind::wgmma_pk);
  const gemv_config table = pick_gemv_config(1, 151936, 2560),
                    folded = *pick_gemv_config_folded(1, 151936, 2560, false);
  EXPECT_EQ(std::tie(folded.rows_per_warp, folded.warps_per_block, folded.unroll, folded.split_k),
            std::tie(table.rows_per_warp, table.warps_per_block, table.unroll, table.split_k));
  // Refused before touching the device: a norm on the mma family, a misaligned norm weight, the
  // add on the gated launch.
  EXPECT_EQ(launch_gemv_bf16(p, p, p, 1, 64, 8, {16, 4, 2, 1, gemv_kind::mma}, nullptr, nullptr,
                             false, &norm),
            cudaErrorInvalidValue);
  gemv_fusion odd = norm;
  odd.norm_weight = p + 1;
  EXPECT_EQ(launch_gemv_bf16(p, p, p, 1, 64, 8, {2, 4, 2, 1}, nullptr, nullptr, false, &odd),
            cudaErrorInvalidValue);
  EXPECT_EQ(launch_gemv_bf16_gated(p, p, p, 1, 64, 8, {2, 4, 2, 1}, nullptr, false, &add),
            cudaErrorInvalidValue);
}

// The step's own rows: at batch 1 the engine's step runs the simt family (two rows a warp, 4
// warps, unroll 2, no split) for qkv and gate_up, which takes the SiLU gate as its epilogue; at
// every other batch and shape the kernel-alone table's row.
TEST(gemv_config, the_step_runs_its_own_rows_at_batch_1_and_the_table_elsewhere) {
  const auto fields = [](const gemv_config& c) {
    return std::tuple(c.kind, c.rows_per_warp, c.warps_per_block, c.unroll, c.split_k, c.cluster,
                      c.batch_warps);
  };
  const gemv_config simt_2_4_2{2, 4, 2, 1};
  for (const int n : {6144, 19456}) {
    EXPECT_EQ(fields(pick_gemv_config_in_step(1, n, 2560)), fields(simt_2_4_2)) << n;
    EXPECT_NE(fields(pick_gemv_config(1, n, 2560)), fields(simt_2_4_2)) << n; // alone: another
  }
  EXPECT_TRUE(gemv_gated_supported(pick_gemv_config_in_step(1, 19456, 2560), 1, 19456, 2560));
  for (const auto& [n, k] : {std::pair{6144, 2560},
                             {2560, 4096},
                             {19456, 2560},
                             {2560, 9728},
                             {151936, 2560},
                             {1000, 64}})
    for (int batch = 1; batch <= 128; ++batch) {
      if (batch == 1 && k == 2560 && (n == 6144 || n == 19456)) continue;
      EXPECT_EQ(fields(pick_gemv_config_in_step(batch, n, k)),
                fields(pick_gemv_config(batch, n, k)))
          << n << "x" << k << " batch " << batch;
    }
}

// The one-word spelling kg_bench_decode_step --gemv reads: written by hand here, each field in the
// table's order, and every configuration the table picks for a Qwen3 shape written and read back
// unchanged.
TEST(gemv_config, a_configuration_reads_back_from_its_one_word_spelling) {
  const auto fields = [](const gemv_config& c) {
    return std::tuple(c.kind, c.rows_per_warp, c.warps_per_block, c.unroll, c.split_k, c.cluster,
                      c.batch_warps);
  };
  const auto simt = parse_gemv_config("simt:2,4,2,1");
  ASSERT_TRUE(simt.has_value());
  EXPECT_EQ(fields(*simt), std::tuple(gemv_kind::simt, 2, 4, 2, 1, 0, 1));
  const auto sw = parse_gemv_config("wgmma_sw:48,4,4,2,1");
  ASSERT_TRUE(sw.has_value());
  EXPECT_EQ(fields(*sw), std::tuple(gemv_kind::wgmma_sw, 48, 4, 4, 2, 1, 1));
  const auto gemm = parse_gemv_config("gemm:16,4,4,8,0,2");
  ASSERT_TRUE(gemm.has_value());
  EXPECT_EQ(fields(*gemm), std::tuple(gemv_kind::gemm, 16, 4, 4, 8, 0, 2));
  EXPECT_EQ(gemv_config_text({2, 4, 2, 1}), "simt:2,4,2,1");
  EXPECT_EQ(gemv_config_text({64, 4, 6, 3, gemv_kind::wgmma_ws}), "wgmma_ws:64,4,6,3");
  EXPECT_EQ(gemv_config_text({40, 4, 8, 2, gemv_kind::wgmma_sw, 1}), "wgmma_sw:40,4,8,2,1");
  EXPECT_EQ(gemv_config_text({16, 4, 4, 8, gemv_kind::gemm, 0, 2}), "gemm:16,4,4,8,0,2");
  for (const auto& g : decode_gemms())
    for (int b = 1; b <= 128; ++b) {
      const gemv_config c = pick_gemv_config(b, static_cast<int>(g.n), static_cast<int>(g.k));
      const auto back = parse_gemv_config(gemv_config_text(c));
      ASSERT_TRUE(back.has_value()) << g.name << " b" << b << ": " << gemv_config_text(c);
      EXPECT_EQ(fields(*back), fields(c)) << g.name << " b" << b;
    }
  for (const char* bad : {"", "simt", "simt:", "simt:2,4,2", "simt:2,4,2,1,0,1,9", "foo:2,4,2,1",
                          "SIMT:2,4,2,1", "simt:2,,2,1", "simt:2,4,2,1,", "simt:2,4,2,1x",
                          "simt: 2,4,2,1", "simt:2,4,2,99999999999", ":2,4,2,1", "simt;2,4,2,1"})
    EXPECT_FALSE(parse_gemv_config(bad).has_value()) << "'" << bad << "'";
}

// The rule pick_gemv_config_folded picks by, asked of any configuration: the simt family takes a
// norm (and the gate at two rows a warp, split 1), the tensor-core families take neither.
TEST(gemv_config, whether_a_configuration_takes_a_folded_norm_and_the_gate) {
  EXPECT_TRUE(gemv_takes_folded_norm({2, 4, 2, 1}, 1, 19456, 2560, true));
  EXPECT_TRUE(gemv_takes_folded_norm({4, 8, 2, 1}, 1, 6144, 2560, false));
  EXPECT_FALSE(gemv_takes_folded_norm({4, 8, 2, 1}, 1, 19456, 2560, true)); // 4 rows a warp
  EXPECT_FALSE(gemv_takes_folded_norm({2, 4, 2, 2}, 1, 19456, 2560, true)); // split K
  EXPECT_FALSE(gemv_takes_folded_norm({128, 8, 4, 1, gemv_kind::wgmma_pk}, 1, 19456, 2560, false));
  EXPECT_FALSE(gemv_takes_folded_norm({16, 4, 2, 1, gemv_kind::mma}, 2, 6144, 2560, false));
  EXPECT_FALSE(gemv_takes_folded_norm({2, 4, 2, 1}, 1, 6144, 2564, false)); // k % 8: not run
  // The rule agrees with the pick: where pick_gemv_config_folded gives a configuration it takes
  // the fold, and the table's own pick is it wherever the table's takes the fold.
  for (const auto& g : decode_gemms())
    for (int b = 1; b <= 8; ++b)
      for (const bool gated : {false, true}) {
        const int n = static_cast<int>(g.n), k = static_cast<int>(g.k);
        const auto f = pick_gemv_config_folded(b, n, k, gated);
        if (f) {
          EXPECT_TRUE(gemv_takes_folded_norm(*f, b, n, k, gated)) << g.name << " b" << b;
        }
        if (gemv_takes_folded_norm(pick_gemv_config(b, n, k), b, n, k, gated)) {
          EXPECT_TRUE(f.has_value()) << g.name << " b" << b;
        }
      }
}

// The paired copy: the same bytes as wgmma_tiles, only where n % 16 == 0; its rows are a
// permutation of w's in which each 16-row group holds 8 gate rows, then their 8 up rows.
TEST(gemv_config, the_paired_copy_puts_each_gate_row_8_rows_above_its_up_row) {
  constexpr auto paired = gemv_layout::wgmma_tiles_paired;
  EXPECT_EQ(gemv_packed_bytes(paired, 19456, 2560),
            gemv_packed_bytes(gemv_layout::wgmma_tiles, 19456, 2560));
  EXPECT_EQ(gemv_packed_bytes(paired, 2008, 296), 0u); // n % 16
  EXPECT_EQ(gemv_packed_bytes(paired, 2000, 297), 0u); // k % 8
  EXPECT_GT(gemv_packed_bytes(paired, 2000, 296), 0u);
  for (const int n : {16, 2000, 19456}) {
    std::vector<int> seen(static_cast<std::size_t>(n), 0);
    for (int row = 0; row < n; ++row) {
      const int src = gemv_detail::paired_source_row(row, n);
      ASSERT_GE(src, 0);
      ASSERT_LT(src, n);
      ++seen[static_cast<std::size_t>(src)];
      if (row % 16 < 8) { // a gate row: its up row 8 rows below, the output j = src
        EXPECT_LT(src, n / 2);
        EXPECT_EQ(gemv_detail::paired_source_row(row + 8, n), src + n / 2);
        EXPECT_EQ(row / 16 * 8 + row % 16, src); // the epilogue's j
      }
    }
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(seen[static_cast<std::size_t>(r)], 1) << "n " << n << ", row " << r;
  }
  // By hand: n = 32, rows 0-7 gate 0-7, 8-15 up 16-23, 16-23 gate 8-15, 24-31 up 24-31.
  for (const auto& [row, src] : {std::pair{0, 0}, {7, 7}, {8, 16}, {15, 23}, {16, 8}, {24, 24}})
    EXPECT_EQ(gemv_detail::paired_source_row(row, 32), src) << row;
  std::uint16_t buf[8] = {};
  auto* p = reinterpret_cast<__nv_bfloat16*>(buf);
  EXPECT_EQ(pack_gemv_weights(paired, p, p, 2008, 296, nullptr), cudaErrorInvalidValue);
}
