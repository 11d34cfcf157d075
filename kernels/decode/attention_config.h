// How the split-KV decode attention (decode_kernels.h, launch_attention) cuts a sequence into
// chunks and how stage 1 streams a chunk, as a small configuration so that bench/attention_sweep
// can time several side by side and the tests can check each. The engine uses
// pick_attention_config(rows) through launch_attention.
//
// The split depends only on a row's length (never on the SM count or the other rows): a row of
// length len is cut into chunks of attention_chunk_tokens(c, len) tokens, aiming at
// c.target_chunks chunks, the chunk rounded up to a multiple of the tile and clamped to
// [min_chunk, max_chunk]. A short sequence therefore still gets enough blocks to fill the GPU
// (batch 1, 2048 tokens: 16 chunks of 128 per kv head), while a long one keeps chunks long enough
// to stream (8192 tokens: 16 chunks of 512). Stage 1 computes the chunk on the device from
// lengths[b]; the grid is sized by attention_max_chunks(c, max_context), which bounds the count
// for every length up to max_context, so one CUDA graph per batch size serves every length.
//
// These functions are constexpr and host + device so that the kernels, the workspace sizing and
// the CPU unit tests (tests/test_attention_config.cpp) share one definition.
#pragma once

#include <cstddef>

#if defined(__CUDACC__)
#define KG_ATTENTION_HD __host__ __device__
#else
#define KG_ATTENTION_HD
#endif

namespace kg::decode {

struct attention_config {
  // Chunks a sequence is cut into, before rounding and clamping. 16: the best at both of the
  // issue's shapes in the H200 sweep that set this default (docs/performance.md, Decode
  // attention, has the times); pick_attention_config takes 8 from a batch of 4.
  int target_chunks = 16;
  int min_chunk = 64;   // tokens; a multiple of tile
  int max_chunk = 1024; // tokens; a multiple of tile, >= min_chunk
  int tile = 32;        // tokens per pipeline stage (K and V tile in shared memory): 32 or 64
  int stages = 2;       // tiles buffered in shared memory (stages - 1 in flight): 2, 3 or 4
  bool pdl = true;      // stage 2 launched with programmatic dependent launch (overlaps its launch)
  // Stage 2 folded into stage 1: the last block of a (row, kv head) to finish merges that row's
  // chunks (counted on attention_args::counters), so no second kernel waits for stage 1 to
  // drain. The merge's arithmetic and order are stage 2's: the same bits either way, and a
  // launch without counters, or whose chunk states would not fit a block's shared memory
  // (attention_merges_in_stage1), runs stage 2 instead.
  bool merge_in_stage1 = false;
  // Stage 1's warps a block: 4, or 8 with 64-token tiles and 2 stages. Eight warps halve each
  // thread's arithmetic of a tile (at batch 1 a block's whole input is 64 KB, and its ramp and
  // arithmetic, not its bytes, set its time: docs/performance.md, Decode attention) and give the
  // same bits: every sum keeps its terms and their order (attention_splitkv.cu).
  int warps = 4;
  // Stage 1 on the tensor cores (mma.sync m16n8k16, bf16 in, float32 sums): a warp's 16 tokens
  // of a tile score against the group's q rows in 8 MMAs (S^T = K Q^T: tokens are the M rows, the
  // group the N columns), and O^T += V^T P^T gives each warp its own head dimensions, so no
  // partial outputs meet in shared memory. P enters as two bf16 terms (p rounded, then what the
  // rounding left), so the sums keep about 16 bits of each probability. Where a block's time is
  // its arithmetic's latency (one block an SM at batch 1), this is a few MMAs a warp and tile
  // instead of some 500 dependent FMAs and shuffles a thread. 64-token tiles, 4 warps, 2 or 3
  // stages; different bits from the FMA path (another order of summation), the same bits on
  // every run and partition.
  bool tensor_cores = false;

  constexpr bool operator==(const attention_config&) const = default;
};

// The sweep's baseline: every other configuration of attention_sweep_configs varies it.
constexpr attention_config default_attention_config() {
  return attention_config{};
}

// The configuration launch_attention uses for a batch of `rows`: a function of the batch alone
// (one CUDA graph per batch size holds one launch), never of the SMs. Stage 1 on the tensor
// cores, 16 chunks of 64-token tiles, at every batch: in the decode step (H100, 2026-12-05) it
// took stage 1 from 6.51 to 5.66 us a layer at batch 1 and from 32.0 to 24.1 at batch 8 against
// the FMA configurations picked before (64-token tiles at batch 1; 8 chunks of 32-token tiles
// from batch 4, the H200 sweep's), the step 1.0% and 4.2% faster; on the H200 the step at batch
// 1-128 was 1.3-12% faster than with the batch-1 FMA configuration (docs/performance.md, Decode
// attention).
constexpr attention_config pick_attention_config(int) {
  attention_config c;
  c.tile = 64;
  c.tensor_cores = true;
  return c;
}

// Whether launch_attention_with accepts the configuration (the rules above).
constexpr bool attention_config_supported(const attention_config& c) {
  return (c.tile == 32 || c.tile == 64) && c.stages >= 2 && c.stages <= 4 && c.target_chunks >= 1 &&
         c.min_chunk >= c.tile && c.min_chunk % c.tile == 0 && c.max_chunk >= c.min_chunk &&
         c.max_chunk % c.tile == 0 &&
         (c.warps == 4 || (c.warps == 8 && c.tile == 64 && c.stages == 2)) &&
         (!c.tensor_cores || (c.tile == 64 && c.warps == 4 && c.stages <= 3));
}

// Tokens per chunk for a row of length len >= 1 (a supported configuration).
KG_ATTENTION_HD constexpr int attention_chunk_tokens(const attention_config& c, int len) {
  const int want = (len + c.target_chunks - 1) / c.target_chunks;
  const int rounded = (want + c.tile - 1) / c.tile * c.tile;
  return rounded < c.min_chunk ? c.min_chunk : rounded > c.max_chunk ? c.max_chunk : rounded;
}

// Chunks a row of length len >= 1 is cut into; every chunk holds at least one token.
KG_ATTENTION_HD constexpr int attention_chunks(const attention_config& c, int len) {
  const int chunk = attention_chunk_tokens(c, len);
  return (len + chunk - 1) / chunk;
}

// An upper bound of attention_chunks(c, len) over 1 <= len <= max_context (the grid's x extent
// and the workspace's chunk count). While the chunk is not clamped at max_chunk it is at least
// len / target_chunks, so a row has at most target_chunks chunks; clamped at max_chunk it has
// ceil(len / max_chunk); and never more than ceil(len / min_chunk).
constexpr int attention_max_chunks(const attention_config& c, int max_context) {
  const int by_max = (max_context + c.max_chunk - 1) / c.max_chunk;
  const int by_min = (max_context + c.min_chunk - 1) / c.min_chunk;
  const int bound = c.target_chunks > by_max ? c.target_chunks : by_max;
  return bound < by_min ? bound : by_min;
}

// The bytes of one (row, kv head)'s chunk states (group x (head_dim + 2) floats a chunk, up to
// attention_max_chunks) that a merging block stages in shared memory.
constexpr std::size_t attention_merge_bytes(const attention_config& c, int q_heads, int kv_heads,
                                            int head_dim, int max_context) {
  return static_cast<std::size_t>(attention_max_chunks(c, max_context)) * (q_heads / kv_heads) *
         (head_dim + 2) * sizeof(float);
}

// Whether a launch of `c` merges in stage 1 (given counters and a 16-byte aligned workspace):
// asked for, an even GQA group (a chunk state is then a whole number of 16-byte copies), and the
// chunk states fit the shared memory a merging block stages them in (96 KiB: two blocks an SM
// still fit).
constexpr std::size_t attention_merge_smem_limit = 96 * 1024;
constexpr bool attention_merges_in_stage1(const attention_config& c, int q_heads, int kv_heads,
                                          int head_dim, int max_context) {
  return c.merge_in_stage1 && kv_heads > 0 && (q_heads / kv_heads) % 2 == 0 &&
         attention_merge_bytes(c, q_heads, kv_heads, head_dim, max_context) <=
             attention_merge_smem_limit;
}

// The configurations bench/attention_sweep times side by side and the GPU tests check, the
// default first. Each varies one thing from the default, to say what that thing is worth (the
// last combines two):
struct named_attention_config {
  const char* name;
  attention_config config;
};
inline constexpr named_attention_config attention_sweep_configs[] = {
    {"default", default_attention_config()}, // target 16, min 64, tile 32, 2 stages, PDL
    // stage 2 launched plainly: what the programmatic dependent launch hides
    {"no-pdl", {16, 64, 1024, 32, 2, false}},
    // pipeline depth: 2 or 3 tiles in flight while one is used (1 by default)
    {"stages3", {16, 64, 1024, 32, 3, true}},
    {"stages4", {16, 64, 1024, 32, 4, true}},
    // how many chunks a sequence is cut into (b1 x 2048: 8, 32 or 64 blocks per kv head);
    // target8 is pick_attention_config's for batches of 4 and more
    {"target8", {8, 64, 1024, 32, 2, true}},
    {"target32", {32, 64, 1024, 32, 2, true}},
    {"target64", {64, 32, 1024, 32, 2, true}},
    // a longer minimum chunk: fewer, longer blocks for short sequences
    {"min128", {16, 128, 1024, 32, 2, true}},
    // 64-token tiles (twice the bytes per cp.async round, half the synchronizations);
    // tile64-s2 is pick_attention_config's below a batch of 4
    {"tile64-s2", {16, 64, 1024, 64, 2, true}},
    {"tile64-s3", {16, 64, 1024, 64, 3, true}},
    // the two best single changes of the first H200 sweep together
    {"t32-tile64-s2", {32, 64, 1024, 64, 2, true}},
    // the old split (a fixed 256 tokens, whatever the length) with the new stage 1
    {"fixed256", {1, 256, 256, 32, 2, true}},
    // stage 2 folded into stage 1 (its last block a row and kv head merges), the chunk states
    // staged in one round of copies: the default and pick_attention_config's two
    // configurations. (An earlier form, merging with a load per chunk, lost on the H200:
    // docs/architecture.md, measured and dropped.)
    {"merge", {16, 64, 1024, 32, 2, true, true}},
    {"tile64-s2-merge", {16, 64, 1024, 64, 2, true, true}},
    {"target8-merge", {8, 64, 1024, 32, 2, true, true}},
    // b1 x 2048 as 256 blocks of one 64-token tile, each loaded whole before the programmatic
    // wait in the step; its 32 chunks are past stage 2's one round of loads (16), not past the
    // merge's staging
    {"t32-tile64-merge", {32, 64, 1024, 64, 2, true, true}},
    // batch 1's configuration with 8 warps a block (the same bits, half the arithmetic a
    // thread), two kernels and merged
    {"tile64-w8", {16, 64, 1024, 64, 2, true, false, 8}},
    {"tile64-w8-merge", {16, 64, 1024, 64, 2, true, true, 8}},
    // stage 1 on the tensor cores: pick_attention_config's; with the whole 128-token chunk of
    // b1 x 2048 in flight (in the step, loaded before the programmatic wait); and batch 8's
    // split before it, with 64-token tiles
    {"tc", {16, 64, 1024, 64, 2, true, false, 4, true}},
    {"tc-s3", {16, 64, 1024, 64, 3, true, false, 4, true}},
    {"tc-target8", {8, 64, 1024, 64, 2, true, false, 4, true}},
};

} // namespace kg::decode
