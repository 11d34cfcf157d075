// CPU side of the split-KV decode attention (kernels/decode/attention_config.h): the chunk a
// sequence is cut into follows its length only and covers it with non-empty chunks, the grid and
// workspace bound covers every length up to max_context, and unsupported requests are refused
// before the device is touched (so these run without a GPU).
#include <algorithm>
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "kernels/decode/decode_kernels.h"

using namespace kg::decode;

namespace {

// The largest chunk count over every length 1..max_context, counted one length at a time.
int brute_max_chunks(const attention_config& c, int max_context) {
  int most = 0;
  for (int len = 1; len <= max_context; ++len)
    most = std::max(most, attention_chunks(c, len));
  return most;
}

template <typename T>
T* fake(std::uintptr_t a = 0x10000) {
  return reinterpret_cast<T*>(a);
}

} // namespace

TEST(attention_config, default_splits_the_qwen3_contexts_as_documented) {
  const attention_config c = default_attention_config();
  ASSERT_TRUE(attention_config_supported(c));
  // Batch 1 x 2048 tokens: 16 chunks of 128 (128 blocks over 8 kv heads, not 64).
  EXPECT_EQ(attention_chunk_tokens(c, 2048), 128);
  EXPECT_EQ(attention_chunks(c, 2048), 16);
  // 8192 tokens: 16 chunks of 512, long enough to stream.
  EXPECT_EQ(attention_chunk_tokens(c, 8192), 512);
  EXPECT_EQ(attention_chunks(c, 8192), 16);
  // One token past a chunk boundary: ceil(2049 / 16) = 129 rounds up to 160 (a tile of 32), and
  // 13 chunks of 160 cover it (12 x 160 = 1920 < 2049 <= 2080).
  EXPECT_EQ(attention_chunk_tokens(c, 2049), 160);
  EXPECT_EQ(attention_chunks(c, 2049), 13);
  // Short sequences: one minimum chunk; very long ones: clamped at max_chunk.
  EXPECT_EQ(attention_chunk_tokens(c, 1), 64);
  EXPECT_EQ(attention_chunks(c, 1), 1);
  EXPECT_EQ(attention_chunks(c, 65), 2);
  EXPECT_EQ(attention_chunk_tokens(c, 40960), 1024);
  EXPECT_EQ(attention_chunks(c, 40960), 40);
}

TEST(attention_config, every_sweep_configuration_cuts_every_length_into_non_empty_chunks) {
  ASSERT_STREQ(attention_sweep_configs[0].name, "default");
  for (const auto& [name, c] : attention_sweep_configs) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(attention_config_supported(c));
    for (int len = 1; len <= 50000; ++len) {
      const int chunk = attention_chunk_tokens(c, len), n = attention_chunks(c, len);
      ASSERT_EQ(chunk % c.tile, 0) << "len " << len;
      ASSERT_GE(chunk, c.min_chunk) << "len " << len;
      ASSERT_LE(chunk, c.max_chunk) << "len " << len;
      // n chunks cover the sequence and the last one holds at least one token.
      ASSERT_GE(static_cast<long long>(n) * chunk, len) << "len " << len;
      ASSERT_LT(static_cast<long long>(n - 1) * chunk, len) << "len " << len;
      // The target is met unless the chunk is clamped at max_chunk.
      if (chunk < c.max_chunk) {
        ASSERT_LE(n, c.target_chunks) << "len " << len;
      }
    }
  }
}

TEST(attention_config, max_chunks_bounds_every_length_up_to_max_context) {
  for (const auto& [name, c] : attention_sweep_configs)
    for (const int max_context :
         {1,    31,   32,   63,   64,   65,   100,  255,   256,   257,  1000,
          2047, 2048, 2049, 4096, 8191, 8192, 8193, 16384, 32768, 40960}) {
      SCOPED_TRACE(std::string(name) + " max_context " + std::to_string(max_context));
      const int bound = attention_max_chunks(c, max_context),
                most = brute_max_chunks(c, max_context);
      EXPECT_GE(bound, most);
      // Not loose: blocks past a row's last chunk cost a launch slot each.
      EXPECT_LE(bound, most + 1);
    }
  // The default at the Qwen3 contexts: exactly the chunk count of a full-length row.
  const attention_config d = default_attention_config();
  EXPECT_EQ(attention_max_chunks(d, 2048), 16);
  EXPECT_EQ(attention_max_chunks(d, 8192), 16);
  EXPECT_EQ(attention_max_chunks(d, 40960), 40);
  EXPECT_EQ(attention_max_chunks(d, 100), 2);
}

TEST(attention_config, workspace_covers_the_bound_and_the_rows_overload_covers_every_batch) {
  for (const auto& [name, c] : attention_sweep_configs) {
    SCOPED_TRACE(name);
    for (const int max_context : {1, 2048, 8192, 40960})
      EXPECT_EQ(attention_workspace_bytes(c, 8, 32, 8, 128, max_context),
                std::size_t{8} * 32 * attention_max_chunks(c, max_context) * 130 * sizeof(float));
  }
  // Under pick_attention_config a row has at most 16 chunks of 8192 tokens at every batch, each
  // chunk 32 heads x (128 + 2) floats: the graphs of batches 1..rows share rows x 16 chunks.
  for (const int rows : {1, 4, 32})
    EXPECT_EQ(attention_workspace_bytes(rows, 32, 8, 128, 8192),
              std::size_t(rows) * 16 * 32 * 130 * 4);
  attention_config bad = default_attention_config();
  bad.tile = 16;
  EXPECT_EQ(attention_workspace_bytes(bad, 4, 32, 8, 128, 8192), 0u);
}

TEST(attention_config, unsupported_configurations_and_shapes_are_refused_without_a_device) {
  const attention_config d = default_attention_config();
  auto with = [&](auto change) {
    attention_config c = d;
    change(c);
    return c;
  };
  const attention_config bad[] = {
      with([](attention_config& c) { c.tile = 16; }),
      with([](attention_config& c) { c.tile = 48; }),
      with([](attention_config& c) { c.stages = 1; }),
      with([](attention_config& c) { c.stages = 5; }),
      with([](attention_config& c) { c.target_chunks = 0; }),
      with([](attention_config& c) { c.min_chunk = 48; }),   // not a multiple of the tile
      with([](attention_config& c) { c.min_chunk = 0; }),    // below a tile
      with([](attention_config& c) { c.max_chunk = 32; }),   // below min_chunk
      with([](attention_config& c) { c.max_chunk = 1000; }), // not a multiple of the tile
      // 8 warps: 64-token tiles and 2 stages only (a warp takes 8 tokens of a tile); no 2 or 16
      with([](attention_config& c) { c.warps = 8; }), // 32-token tiles
      with([](attention_config& c) {
        c.warps = 8;
        c.tile = 64;
        c.stages = 3;
      }),
      with([](attention_config& c) {
        c.warps = 2;
        c.tile = 64;
      }),
      with([](attention_config& c) {
        c.warps = 16;
        c.tile = 64;
      }),
      // the tensor cores: 64-token tiles (a warp's 16 tokens are one MMA's rows), 4 warps, 2 or
      // 3 stages
      with([](attention_config& c) { c.tensor_cores = true; }), // 32-token tiles
      with([](attention_config& c) {
        c.tensor_cores = true;
        c.tile = 64;
        c.warps = 8;
      }),
      with([](attention_config& c) {
        c.tensor_cores = true;
        c.tile = 64;
        c.stages = 4;
      }),
  };
  auto* q = fake<const __nv_bfloat16>();
  auto* kv = fake<__nv_bfloat16>();
  auto* o = fake<__nv_bfloat16>();
  auto* i = fake<const int>();
  // A valid call but for what each case changes.
  const attention_args ok{q, 32 * 128, kv, kv, i, i, o, fake<void>(), 1, 32, 8, 128, 2048};
  for (const auto& c : bad) {
    EXPECT_FALSE(attention_config_supported(c));
    EXPECT_EQ(launch_attention_with(c, ok, nullptr), cudaErrorInvalidValue);
  }
  // Shapes: head_dim 96, group 3, a misaligned q, a q row stride not a multiple of 8.
  auto changed = [&](auto change) {
    attention_args a = ok;
    change(a);
    return launch_attention(a, nullptr);
  };
  EXPECT_EQ(changed([](attention_args& a) {
              a.q_row_stride = 32 * 96;
              a.head_dim = 96;
            }),
            cudaErrorInvalidValue);
  EXPECT_EQ(changed([](attention_args& a) {
              a.q_row_stride = 24 * 128;
              a.q_heads = 24;
            }),
            cudaErrorInvalidValue);
  EXPECT_EQ(changed([](attention_args& a) { a.q = fake<const __nv_bfloat16>(0x10008); }),
            cudaErrorInvalidValue);
  EXPECT_EQ(changed([](attention_args& a) { a.q_row_stride = 32 * 128 + 4; }),
            cudaErrorInvalidValue);
}

// What the engine launches is what the sweep times and the GPU tests check.
TEST(attention_config, the_picked_configurations_are_supported_and_swept) {
  for (int rows = 1; rows <= 32; ++rows) {
    SCOPED_TRACE(rows);
    const attention_config c = pick_attention_config(rows);
    EXPECT_TRUE(attention_config_supported(c));
    int found = 0;
    for (const auto& [name, s] : attention_sweep_configs)
      found += s == c ? 1 : 0;
    EXPECT_EQ(found, 1);
  }
  EXPECT_TRUE(pick_attention_config(1).tensor_cores);
  EXPECT_EQ(pick_attention_config(1).tile, 64);
  EXPECT_EQ(pick_attention_config(8), pick_attention_config(1));
}

TEST(attention_config, merging_in_stage_1_needs_an_even_group_and_states_that_fit) {
  attention_config c = default_attention_config();
  c.merge_in_stage1 = true;
  // Qwen3-4B at 8192: 16 chunks x group 4 x (128 + 2) floats = 33,280 bytes, by hand.
  EXPECT_EQ(attention_merge_bytes(c, 32, 8, 128, 8192), std::size_t{16} * 4 * 130 * 4);
  EXPECT_TRUE(attention_merges_in_stage1(c, 32, 8, 128, 8192));
  // Group 8 at head_dim 128: 16 x 8 x 130 x 4 = 66,560 <= 96 KiB.
  EXPECT_TRUE(attention_merges_in_stage1(c, 64, 8, 128, 8448));
  // An odd group (a state of 130 floats is not whole 16-byte copies): stage 2.
  EXPECT_FALSE(attention_merges_in_stage1(c, 8, 8, 128, 8192));
  EXPECT_FALSE(attention_merges_in_stage1(c, 24, 8, 128, 8192));
  // 64 chunks x 8 x 130 x 4 = 266,240 bytes do not fit: stage 2.
  attention_config many = c;
  many.target_chunks = 64;
  many.min_chunk = 32;
  EXPECT_EQ(attention_merge_bytes(many, 64, 8, 128, 8192), std::size_t{64} * 8 * 130 * 4);
  EXPECT_FALSE(attention_merges_in_stage1(many, 64, 8, 128, 8192));
  // Not asked for.
  EXPECT_FALSE(attention_merges_in_stage1(default_attention_config(), 32, 8, 128, 8192));
}

// Each 8-warp configuration of the sweep is timed beside its 4-warp twin (the same bits: the GPU
// tests compare them), tile64-s2 among them.
TEST(attention_config, each_eight_warp_sweep_configuration_has_its_four_warp_twin) {
  int eight = 0;
  for (const auto& [name, c] : attention_sweep_configs) {
    if (c.warps != 8) continue;
    ++eight;
    SCOPED_TRACE(name);
    EXPECT_TRUE(attention_config_supported(c));
    attention_config four = c;
    four.warps = 4;
    EXPECT_TRUE(std::any_of(std::begin(attention_sweep_configs), std::end(attention_sweep_configs),
                            [&](const auto& o) { return o.config == four; }));
  }
  EXPECT_GE(eight, 1);
  // The FMA path's batch-1 configuration before the tensor cores (tile64-s2) has its 8-warp twin.
  attention_config b1 = default_attention_config();
  b1.tile = 64;
  b1.warps = 8;
  EXPECT_TRUE(std::any_of(std::begin(attention_sweep_configs), std::end(attention_sweep_configs),
                          [&](const auto& o) { return o.config == b1; }));
}

TEST(attention_config, each_merging_sweep_configuration_has_its_stage_2_twin_in_the_sweep) {
  int merging = 0;
  for (const auto& [name, c] : attention_sweep_configs) {
    if (!c.merge_in_stage1) continue;
    ++merging;
    SCOPED_TRACE(name);
    EXPECT_TRUE(attention_merges_in_stage1(c, 32, 8, 128, 8448)) << "Qwen3-4B's shape";
    attention_config staged = c;
    staged.merge_in_stage1 = false;
    const auto twin =
        std::find_if(std::begin(attention_sweep_configs), std::end(attention_sweep_configs),
                     [&](const auto& o) { return o.config == staged; });
    EXPECT_NE(twin, std::end(attention_sweep_configs)) << "no stage-2 twin to time it beside";
  }
  EXPECT_GE(merging, 2);
}
