// The decode engine's GEMV / skinny GEMM (issue: workloads under test): y[b, n] = sum_k x[b, k]
// w[n, k] in BF16 with float32 accumulation, for batch 1..128 and the Qwen3-4B projections. The
// configuration (how rows, K and the batch are split over warps and blocks) is chosen per
// (batch, n, k) by pick_gemv_config; bench/gemv_sweep times every configuration side by side.
// Deterministic: a split-K sums its partial results in a fixed order (no atomics), so a GEMV
// gives the same bits whatever SMs it runs on -- the solo vs co-located logits gate needs that.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace kg {

// How a launch streams the weights and does the arithmetic (each family is its own kernel).
//   simt: each lane loads its weight chunks into registers (ld.global.nc, `unroll` per row in
//         flight) and does float32 FMAs; a warp owns rows_per_warp rows.
//   bulk: Hopper bulk async copies (cp.async.bulk global -> shared, completion on an mbarrier)
//         fill a ring of `unroll` stages per block, each stage 1 KB of every row of the block's
//         tile (rows_per_warp x warps_per_block rows); one warp issues the copies, so a block
//         keeps up to `unroll` x tile KB in flight with few registers, and every warp computes
//         its rows from shared memory as simt does. Ring bytes: unroll x tile rows x 1 KB.
//   mma:  tensor cores (mma.sync m16n8k16, bf16 in, float32 accumulate) with the weights as the
//         A operand (16 rows per block) and the batch as N (8 columns per mma, up to 32 per
//         launch): each weight byte is read once, into registers, software-pipelined: the next
//         `unroll` 64-element steps of two rows per lane load while the current ones' mma's run.
//         The block's warps_per_block warps split the block's K slice between them (interleaved
//         steps) and their tiles are summed in warp order through shared memory; rows_per_warp must
//         be 16 (the m16 tile).
//   sweep: batch 1 and 2. A fixed grid of 132 x rows_per_warp blocks (here rows_per_warp is the
//         grid's size in units of 132); block b computes whole rows b, b + grid, ... one after
//         another, so the grid reads one contiguous window of the weight at a time, as a plain
//         read does; each thread keeps its columns' x in registers; `unroll` rows in flight per
//         thread (gemv_bf16_sweep.cu).
//   tsweep: batch up to 8, tensor cores over the sweep's access pattern. A fixed grid of 132 x
//         rows_per_warp blocks in (grid / split_k) row lanes of split_k blocks; block b takes K
//         slice b % split_k of the 16-row tiles r, r + lanes, ... (r = b / split_k), one tile
//         after another, its warps side by side over the slice, each lane's x chunks in
//         registers; `unroll` (1, 2) tiles in flight (gemv_bf16_tsweep.cu).
//   packed: the mma family's kernel over a copy of the weights in the order its lanes load them
//         (pack_gemv_weights: each 64-element step of a 16-row tile is 2 KB of consecutive
//         bytes), so a tile is one contiguous range its blocks stream front to back (split K:
//         the tile's blocks interleave their super-steps); k % 64 == 0 (gemv_bf16_packed.cu).
//         Its w is that copy, not the row-major weights.
//   gemm: batch 16 to 128, a skinny GEMM on the tensor cores (gemv_bf16_gemm.cu): a block stages
//         its tile's weight rows and the group's x rows, 64 elements of K at a time, in a ring of
//         `unroll` (3, 4) shared-memory stages filled by cp.async, and its warps read both through
//         ldmatrix, so each x byte loaded serves the whole tile. rows_per_warp: a warp's rows (16,
//         32, 64); batch_warps: warps side by side along the batch (1, 2); the block's rows are
//         rows_per_warp x warps_per_block / batch_warps.
//   wgmma: batch 16 to 128 on Hopper's warpgroup instructions (gemv_bf16_wgmma.cu): the gemm
//         family's ring, read by wgmma.mma_async through shared-memory descriptors instead of
//         ldmatrix. rows_per_warp: a warpgroup's rows (64, 128); warps_per_block 4 or 8 (one or
//         two warpgroups of 128 threads); the block's rows are rows_per_warp x warps_per_block /
//         4.
//   wgmma_tma: the wgmma family with its ring filled by the Tensor Memory Accelerator (one thread
//         issues a stage as two tensor copies completing on an mbarrier) instead of every
//         thread's cp.async (gemv_bf16_wgmma_tma.cu); the same fields, limits and bits.
//   wgmma_ws: the wgmma_tma family's tiles with the block split by role: one producer
//         warpgroup more (128 threads beyond warps_per_block) keeps a deep ring full, the
//         consumers release each stage as they finish it (gemv_bf16_wgmma_ws.cu); the same
//         fields, bits and batch tile, unroll (stages) 6, 8, 12, 16.
//   wgmma_pk: the wgmma_ws block over the wgmma_tiles copy of the weights (pack_gemv_weights:
//         each 64-row tile's 64-column k tile is 8 KB of consecutive bytes, in the order the
//         ring holds it), so a stage's weights arrive by plain bulk copies and a block streams its
//         tile front to back (gemv_bf16_wgmma_pk.cu); the same fields and bits as wgmma_ws,
//         unroll (stages) 4, 6, 8. Its w is that copy, not the row-major weights.
//   wgmma_sw: the wgmma_ws block with the operands swapped (gemv_bf16_wgmma_sw.cu): the batch is
//         the warpgroup MMA's M (64 or 128 rows, zeros past the batch) and the weight rows its N,
//         so rows_per_warp is the block's rows, 40, 48 (tiles that fill 132 SMs where 64-row
//         tiles leave some idle), 64, or 80, 96, 128 (every block reads the whole x tile of its
//         K slice, so wider tiles with a deeper split read less x for the same weights);
//         warps_per_block 4 (one consumer warpgroup, one producer); unroll (stages) 4, 6, 8
//         where the ring fits; row-major weights by TMA; split K with either finish.
enum class gemv_kind : int {
  simt = 0,
  bulk = 1,
  mma = 2,
  sweep = 3,
  tsweep = 4,
  packed = 5,
  gemm = 6,
  wgmma = 7,
  wgmma_tma = 8,
  wgmma_ws = 9,
  wgmma_pk = 11, // (10 was wgmma_sk, a stream-K grid: measured slower and dropped)
  wgmma_sw = 12
};

struct gemv_config {
  int rows_per_warp = 1;   // output rows one warp computes (its x loads serve all of them)
  int warps_per_block = 8; // 32 x this threads per block
  int unroll = 2;          // simt: 16-byte weight loads in flight per lane and row; bulk: ring
                           // stages; mma: 64-element steps loaded ahead per lane
  int split_k = 1;         // K cut into this many slices; > 1 needs a workspace
  gemv_kind kind = gemv_kind::simt;
  // 1 (split_k > 1; simt, wgmma_ws, wgmma_pk): the split_k blocks of a row tile run as one
  // thread-block cluster and add their partial sums through distributed shared memory, in slice
  // order (the bits of the workspace finish), instead of through L2 with a fence, a counter and a
  // re-read by the last block, a tail that shows in the down projection's time
  // (docs/performance.md) and grows with the batch in the wgmma families. No workspace.
  int cluster = 0;
  int batch_warps = 1; // gemm: warps side by side along the batch (1 or 2); 1 elsewhere
};

// "simt", "bulk", "mma", "sweep", "tsweep", "packed", "gemm", "wgmma", "wgmma_tma",
// "wgmma_ws", "wgmma_pk" or "wgmma_sw".
const char* gemv_kind_name(gemv_kind k);

// A configuration as one shell word, "KIND:rows_per_warp,warps_per_block,unroll,split_k[,cluster[,
// batch_warps]]" (the table's order; "simt:2,4,2,1", "wgmma_sw:48,4,4,2,1"): gemv_config_text
// writes it (cluster and batch_warps only where they are not 0 and 1), parse_gemv_config reads it
// back, nullopt for anything else (an unknown kind, a missing, extra or non-numeric field). Whether
// launch_gemv_bf16 takes the configuration is gemv_config_supported's question, not the parser's.
std::string gemv_config_text(const gemv_config& c);
std::optional<gemv_config> parse_gemv_config(std::string_view text);

// The order of the weights a configuration reads.
//   row_major: w as given, [n][k].
//   packed (gemv_kind::packed): ceil(n / 16) 16-row tiles (rows past n zero), each k / 64 steps
//     of 2 KB in the order the mma lanes load them; k % 64 == 0.
//   wgmma_tiles (gemv_kind::wgmma_pk): n rounded up to 256 rows (past n zero), in 64-row tiles,
//     each ceil(k / 64) units of 8 KB (columns past k zero): unit (t, kt) at byte
//     8192 (t ceil(k / 64) + kt) holds rows 64 t .. 64 t + 63 of columns 64 kt .. 64 kt + 63, row
//     r at 128 r, its column chunk c (8 columns, 16 bytes) at chunk position c ^ (r % 8) (the
//     128-byte swizzle); k % 8 == 0.
//   wgmma_tiles_paired (gemv_kind::wgmma_pk, gated): wgmma_tiles of the rows in the gated order,
//     its row 16 s + i being w's row 8 s + i and its row 16 s + 8 + i w's row n / 2 + 8 s + i
//     (i < 8): each gate row 8 rows above its up row; n % 16 == 0.
enum class gemv_layout : int { row_major = 0, packed = 1, wgmma_tiles = 2, wgmma_tiles_paired = 3 };
gemv_layout gemv_weight_layout(const gemv_config& c);
// The layout launch_gemv_bf16_gated reads with `c`: wgmma_tiles_paired for wgmma_pk, else
// gemv_weight_layout's.
gemv_layout gemv_gated_weight_layout(const gemv_config& c);
// Whether that is not row_major: the configuration reads a copy made by pack_gemv_weights.
bool gemv_reads_packed(const gemv_config& c);

// Bytes of an n x k weight's copy in layout `l`; 0 for row_major or a shape the layout does not
// take.
std::size_t gemv_packed_bytes(gemv_layout l, int n, int k);

// Queues the copy of w ([n][k], row-major, 16-byte aligned) in layout `l` into `packed`
// (gemv_packed_bytes(l, n, k) bytes, 16-byte aligned) on `s`. cudaErrorInvalidValue for
// row_major, other shapes or pointers (before touching the device).
cudaError_t pack_gemv_weights(gemv_layout l, const __nv_bfloat16* w, __nv_bfloat16* packed, int n,
                              int k, cudaStream_t s);

// The fastest configuration for this shape timed alone (the H200 table; the cuBLAS comparison's
// and the suite's kernel workloads'): one launch_gemv_bf16 accepts for every shape it accepts at
// all (k % 8 == 0).
gemv_config pick_gemv_config(int batch, int n, int k);

// The configuration the decode engine's step runs: the step's own row where another
// configuration was measured faster inside the step than pick_gemv_config's (qkv and gate_up at
// batch 1), else pick_gemv_config's.
gemv_config pick_gemv_config_in_step(int batch, int n, int k);

// The configuration the decode engine uses where it folds an RMSNorm into this GEMV
// (gemv_fusion::norm_weight), with the SwiGLU gate as its epilogue if `gated`
// (launch_gemv_bf16_gated): pick_gemv_config_in_step's where that takes them (the simt rows at
// batch 1), else nullopt (the norm stays a kernel of its own).
std::optional<gemv_config> pick_gemv_config_folded(int batch, int n, int k, bool gated);

// Whether `c` runs this shape with an RMSNorm folded in (and, if `gated`, the SwiGLU gate as its
// epilogue): the rule pick_gemv_config_folded picks by.
bool gemv_takes_folded_norm(const gemv_config& c, int batch, int n, int k, bool gated);

// The batch rows one launch takes: launch_gemv_bf16 runs larger batches as groups of this many.
int gemv_batch_group(const gemv_config& c);

// Whether launch_gemv_bf16 accepts this configuration and shape (the rules below).
bool gemv_config_supported(const gemv_config& c, int batch, int n, int k);

// Bytes of workspace a configuration needs (0 when split_k == 1 or cluster). The
// workspace must hold this many bytes and be zero-filled once before its first use; every launch
// leaves it ready for the next, whatever configuration and shape that one has (one workspace can
// serve every projection in turn). Launches that may run concurrently need separate workspaces.
std::size_t gemv_workspace_bytes(const gemv_config& c, int batch, int n, int k);

// Queues y = x w^T on `s`. x: [batch, k], w: [n, k] (or its copy in gemv_weight_layout(c)),
// y: [batch, n], all dense row-major; k must be a multiple of 8 (16-byte rows), x and w 16-byte
// aligned, any n and batch >= 1 (batches above a kernel's batch group take several launches, each
// streaming the weights again). Supported, split_k 1, 2, 4, 8 unless said, and 3 for gemm and
// the wgmma families (split_k > 1: at most 65536 row tiles):
//   simt: rows_per_warp 1, 2, 4; unroll 2, 4, 8 with rows_per_warp x unroll <= 16;
//         warps_per_block 4, 8, 16; batch group 32 / rows_per_warp.
//   bulk: rows_per_warp 1, 2, 4; warps_per_block 4, 8; unroll (stages) 2, 4, 8 with a ring of at
//         most 96 KB; batch group min(8, 32 / rows_per_warp).
//   mma:  rows_per_warp 16; unroll 2, 4; warps_per_block 4, 8, 16 with unroll x
//         warps_per_block <= 32 (registers); batch group 32.
//   sweep: rows_per_warp (grid / 132) 1, 2, 3, 4; unroll 1, 2, 4; warps_per_block 8, 16 with
//         k / 8 <= 8 x 32 x warps_per_block (at most 8 chunks per thread); split_k 1; batch
//         group 2.
//   tsweep: rows_per_warp (grid / 132) 1, 2, 3, 4 with the grid a multiple of split_k;
//         unroll 1, 2; warps_per_block 4, 8, 16; N = ceil(slice chunks / (4 x warps_per_block))
//         chunks per lane with N <= 8 and unroll x N <= 8 (registers), slice chunks = ceil(k / 8
//         / split_k) rounded up to even; batch group 8.
//   packed: as mma, with k % 64 == 0 (K slices are whole 64-element steps: ceil(k / 64 /
//         split_k) each); w is the packed copy (pack_gemv_weights).
//   gemm: rows_per_warp 16, 32, 64; warps_per_block 4, 8; batch_warps 1, 2; unroll (stages)
//         3, 4; batch tile bt = the group's batch rounded up to a power of two, at least 16 x
//         batch_warps, at most 128; (rows_per_warp / 16) x bt / (8 x batch_warps) <= 16 m16n8
//         tiles a warp; at most 256 rows a block and a ring of at most 200 KB; K slices are whole
//         64-element k tiles (ceil(k / 64 / split_k) each); batch group 128.
//   wgmma: rows_per_warp (a warpgroup's rows) 64, 128; warps_per_block 4, 8; unroll (stages) 3,
//         4; the gemm family's batch tile (at least 16), (rows_per_warp / 64) x bt / 2 <= 128
//         accumulators a thread; at most 256 rows a block and a ring of at most 200 KB (plus 1 KB
//         of alignment); K slices and batch group as gemm.
//   wgmma_tma: as wgmma.
//   wgmma_ws: as wgmma, with unroll (stages) 6, 8, 12, 16 and a ring of at most 216 KB (plus
//         1 KB of alignment); warps_per_block counts the consumer warps.
//   wgmma_pk: as wgmma_ws with unroll (stages) 4, 6, 8; w is the wgmma_tiles copy.
//   cluster 0 or 1 (1: split_k > 1 in simt, wgmma_ws and wgmma_pk); batch_warps 1 but for
//   gemm.
// Returns cudaErrorInvalidValue for anything else (before touching the device), else the
// launch's error. programmatic: launched as a programmatic dependent of the kernel ahead in `s`
// (programmatic_launch.cuh): its launch overlaps that kernel's tail, and it reads and writes
// nothing before that kernel has completed. Not for a kernel timed alone behind an L2 flush.
// fusion (gemv_fusion, below): a kernel of the decode step folded into this one.
struct gemv_fusion;
cudaError_t launch_gemv_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                             int batch, int n, int k, const gemv_config& c, void* workspace,
                             cudaStream_t s, bool programmatic = false,
                             const gemv_fusion* fusion = nullptr);

// The gate_up projection with the SwiGLU gate as its epilogue: y[b, i] = bf16(silu(g) u) for
// i < n / 2, g = bf16(x_b . w_i), u = bf16(x_b . w_(n/2 + i)) (the gate rows first, as the
// engine lays out gate_up) -- the bits of launch_gemv_bf16 followed by
// decode::launch_silu_gate_mul, in one launch (one kernel fewer a layer; docs/performance.md has
// what the SiLU-gate kernel cost). y: [batch, n / 2]. It exists where a gate row's sum and its up
// row's meet in one thread without a split (gemv_gated_supported; cudaErrorInvalidValue
// elsewhere): the simt family at rows_per_warp 2 (a warp computes both rows; w row-major, n even)
// and the wgmma_pk family (w the wgmma_tiles_paired copy, gemv_gated_weight_layout; n % 16 == 0),
// split_k 1 without a cluster.
bool gemv_gated_supported(const gemv_config& c, int batch, int n, int k);
cudaError_t launch_gemv_bf16_gated(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                                   int batch, int n, int k, const gemv_config& c, cudaStream_t s,
                                   bool programmatic = false, const gemv_fusion* fusion = nullptr);

// The decode step's RMSNorms folded into its GEMVs (one kernel fewer on the step's path for each
// norm: docs/architecture.md, Serving). Each is bit-identical to the kernels it replaces.
//   norm_weight (with norm_eps): x is the residual stream h, and the GEMV reads in its place
//     RMSNorm(h) * norm_weight: decode::launch_add_rmsnorm's output (no delta) with that kernel's
//     arithmetic in its order. norm_weight: [k], 16-byte aligned; k <= 8192.
//   add_to_y: y[b, i] <- bf16(y[b, i] + bf16(sum)), the residual add launch_add_rmsnorm makes
//     with its delta, made in the GEMV's store instead (the same bits; y is then h).
// gemv_fusion_supported: norm_weight in the simt family (the gated launch too), add_to_y in
// every family but not gated; cudaErrorInvalidValue elsewhere.
struct gemv_fusion {
  const __nv_bfloat16* norm_weight = nullptr;
  float norm_eps = 0.0f;
  bool add_to_y = false;
};
bool gemv_fusion_supported(const gemv_config& c, const gemv_fusion& f, int k, bool gated);

} // namespace kg
