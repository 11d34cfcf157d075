// Host side of the decode GEMV (kernels/decode/gemv_bf16.h): configuration checks, the workspace
// layout, batch groups, and the per-shape configuration table.
#include "kernels/decode/gemv_bf16.h"

#include <cstdint>
#include <initializer_list>

#include "kernels/decode/gemv_bf16_launch.h"

namespace kg {
namespace {

using gemv_detail::gemv_args;

// Workspace layout: the per-tile counters first, at a fixed place and of a fixed size whatever
// the configuration and shape, then the partials. Every launch leaves its counters at 0, and no
// launch's partials ever overlap any launch's counters, so one zero-filled workspace serves every
// configuration and shape in turn (the decode engine shares one across its projections).
constexpr int max_split_tiles = 65536; // split_k > 1 needs n <= this x rows per block
constexpr std::size_t counter_bytes = max_split_tiles * sizeof(unsigned);

bool in(int v, std::initializer_list<int> set) {
  for (int e : set)
    if (v == e) return true;
  return false;
}

bool supported(const gemv_config& c) {
  if (!in(c.split_k, {1, 2, 4, 8})) return false;
  switch (c.kind) {
  case gemv_kind::simt:
    // More than 16 weight loads in flight per lane buys nothing and spills registers.
    return in(c.rows_per_warp, {1, 2, 4}) && in(c.unroll, {2, 4, 8}) &&
           in(c.warps_per_block, {4, 8, 16}) && c.rows_per_warp * c.unroll <= 16;
  case gemv_kind::bulk:
    return in(c.rows_per_warp, {1, 2, 4}) && in(c.unroll, {2, 4, 8}) &&
           in(c.warps_per_block, {4, 8}) &&
           gemv_detail::bulk_ring_bytes(c.rows_per_warp * c.warps_per_block, c.unroll) <=
               gemv_detail::bulk_max_ring_bytes;
  case gemv_kind::mma:
    // unroll x warps_per_block <= 32: the pipelined weights then fit the registers (no spills).
    return c.rows_per_warp == 16 && in(c.unroll, {2, 4}) && in(c.warps_per_block, {4, 8, 16}) &&
           c.unroll * c.warps_per_block <= 32;
  }
  return false;
}

// Rows of one block: the mma family's warps share one 16-row tile.
long long tile_rows(const gemv_config& c) {
  return c.kind == gemv_kind::mma ? c.rows_per_warp : c.rows_per_warp * c.warps_per_block;
}

long long row_tiles(const gemv_config& c, int n) {
  return (n + tile_rows(c) - 1) / tile_rows(c);
}

// The largest batch group a kernel exists for: simt, rows_per_warp * group <= 32 accumulators
// per lane; bulk, at most 8 of those (larger batches are the mma family's); mma, four 8-column
// batch tiles.
int max_group(const gemv_config& c) {
  switch (c.kind) {
  case gemv_kind::bulk:
    return 32 / c.rows_per_warp < 8 ? 32 / c.rows_per_warp : 8;
  case gemv_kind::mma:
    return 32;
  default:
    return 32 / c.rows_per_warp;
  }
}

int next_pow2(int v) {
  int p = 1;
  while (p < v)
    p *= 2;
  return p;
}

cudaError_t launch_group(const gemv_args& a, int bg, const gemv_config& c, int blocks,
                         cudaStream_t s) {
  if (c.kind == gemv_kind::bulk)
    return gemv_detail::launch_gemv_bulk(a, bg, c.rows_per_warp, c.unroll, c.warps_per_block,
                                         blocks, s);
  if (c.kind == gemv_kind::mma) // 8-column batch tiles: 1, 2 or 4
    return gemv_detail::launch_gemv_mma(a,
                                        bg <= 8    ? 1
                                        : bg <= 16 ? 2
                                                   : 4,
                                        c.unroll, c.warps_per_block, blocks, s);
  switch (c.rows_per_warp) {
  case 1:
    return gemv_detail::launch_gemv_rows<1>(a, bg, c.unroll, c.warps_per_block, blocks, s);
  case 2:
    return gemv_detail::launch_gemv_rows<2>(a, bg, c.unroll, c.warps_per_block, blocks, s);
  case 4:
    return gemv_detail::launch_gemv_rows<4>(a, bg, c.unroll, c.warps_per_block, blocks, s);
  default:
    return cudaErrorInvalidValue;
  }
}

// Where no table row matches: enough warps for ~16 per SM of an H200 (132 SMs), x shared by up
// to 4 rows as the batch grows, and each lane left at least `unroll` chunks per K slice.
gemv_config heuristic_config(int batch, int n, int k) {
  gemv_config c;
  c.rows_per_warp = batch >= 8 ? 4 : batch >= 4 ? 2 : 1;
  c.unroll = c.rows_per_warp == 4 ? 2 : 4;
  c.warps_per_block = 8;
  const long long warps = (n + c.rows_per_warp - 1) / c.rows_per_warp;
  const int k8 = k / 8;
  c.split_k = 1;
  while (c.split_k < 8 && warps * c.split_k < 132 * 16 && k8 / (2 * c.split_k) >= 32 * c.unroll)
    c.split_k *= 2;
  return c;
}

// Per Qwen3-4B projection: the row applies to batches up to max_batch (after the previous row of
// the same shape). Batches 1 and 2: the fastest configuration of kg_bench_gemv_sweep on the H200
// (2026-11-29, copy bandwidth 4289 GB/s; each row's time and fraction as the sweep printed them).
// Batches 4 to 32: the tensor-core family. Its sweep so far covered the down projection only
// (batch 8: 72.8% of the copy bandwidth against 24.7% for the best simt configuration, side by
// side in one run); it reads each weight once whatever the batch, where simt re-reads weights per
// 4 rows, so it is used for every projection from batch 4 where simt fell to 57% and below. The
// other rows' simt figures are kept in the comments until a full sweep replaces them.
struct table_row {
  int n, k, max_batch;
  gemv_config c; // rows_per_warp, warps_per_block, unroll, split_k
};
constexpr table_row config_table[] = {
    {2560, 9728, 1, {2, 8, 2, 4}}, // down b1: 15.29 us, 76.0% of copy
    {2560, 9728, 2, {1, 8, 2, 2}}, // down b2: 17.63 us, 65.9% of copy
    {2560,
     9728,
     4,
     {16, 4, 2, 4, gemv_kind::mma}}, // down b4: mma, not swept (simt: 27.07 us, 43.0% of copy)
    {2560,
     9728,
     8,
     {16, 4, 2, 4, gemv_kind::mma}}, // down b8: mma 16.13 us, 72.8% of copy (simt 46.98 us, 24.7%)
    {2560,
     9728,
     16,
     {16, 4, 2, 4, gemv_kind::mma}}, // down b16: mma, not swept (simt: 96.58 us, 12.1% of copy)
    {2560,
     9728,
     32,
     {16, 4, 2, 4, gemv_kind::mma}}, // down b32: mma, not swept (simt: 260.57 us, 4.5% of copy)
    {6144, 2560, 1, {2, 8, 2, 1}},   // qkv b1: 9.38 us, 78.3% of copy
    {6144, 2560, 2, {1, 16, 2, 1}},  // qkv b2: 10.62 us, 69.1% of copy
    {6144,
     2560,
     4,
     {16, 4, 2, 4, gemv_kind::mma}}, // qkv b4: mma, not swept (simt: 19.17 us, 38.3% of copy)
    {6144,
     2560,
     8,
     {16, 4, 2, 4, gemv_kind::mma}}, // qkv b8: mma, not swept (simt: 33.31 us, 22.1% of copy)
    {6144,
     2560,
     16,
     {16, 4, 2, 4, gemv_kind::mma}}, // qkv b16: mma, not swept (simt: 61.31 us, 12.1% of copy)
    {6144,
     2560,
     32,
     {16, 4, 2, 4, gemv_kind::mma}}, // qkv b32: mma, not swept (simt: 146.08 us, 5.1% of copy)
    {2560, 4096, 1, {2, 8, 2, 4}},   // o_proj b1: 8.38 us, 58.4% of copy
    {2560, 4096, 2, {4, 8, 2, 4}},   // o_proj b2: 9.50 us, 51.5% of copy
    {2560,
     4096,
     4,
     {16, 4, 2, 4, gemv_kind::mma}}, // o_proj b4: mma, not swept (simt: 16.35 us, 30.0% of copy)
    {2560,
     4096,
     8,
     {16, 4, 2, 4, gemv_kind::mma}}, // o_proj b8: mma, not swept (simt: 24.03 us, 20.4% of copy)
    {2560,
     4096,
     16,
     {16, 4, 2, 4, gemv_kind::mma}}, // o_proj b16: mma, not swept (simt: 46.78 us, 10.6% of copy)
    {2560,
     4096,
     32,
     {16, 4, 2, 4, gemv_kind::mma}}, // o_proj b32: mma, not swept (simt: 117.95 us, 4.2% of copy)
    {19456, 2560, 1, {2, 4, 2, 1}},  // gate_up b1: 24.22 us, 95.9% of copy
    {19456, 2560, 2, {2, 8, 2, 1}},  // gate_up b2: 28.13 us, 82.6% of copy
    {19456,
     2560,
     4,
     {16, 4, 2, 4, gemv_kind::mma}}, // gate_up b4: mma, not swept (simt: 41.89 us, 55.5% of copy)
    {19456,
     2560,
     8,
     {16, 4, 2, 4, gemv_kind::mma}}, // gate_up b8: mma, not swept (simt: 67.62 us, 34.5% of copy)
    {19456,
     2560,
     16,
     {16, 4, 2, 4, gemv_kind::mma}}, // gate_up b16: mma, not swept (simt: 124.80 us, 18.7% of copy)
    {19456,
     2560,
     32,
     {16, 4, 2, 4, gemv_kind::mma}}, // gate_up b32: mma, not swept (simt: 283.52 us, 8.3% of copy)
    {151936, 2560, 1, {4, 8, 2, 1}}, // lm_head b1: 172.80 us, 105.0% of copy
    {151936, 2560, 2, {4, 8, 2, 1}}, // lm_head b2: 182.56 us, 99.4% of copy
    {151936,
     2560,
     4,
     {4, 8, 2, 1}}, // lm_head b4: 207.07 us, 87.7% of copy (simt kept: already high)
    {151936,
     2560,
     8,
     {16, 4, 2, 4, gemv_kind::mma}}, // lm_head b8: mma, not swept (simt: 317.05 us, 57.4% of copy)
    {151936,
     2560,
     16,
     {16, 4, 2, 4, gemv_kind::mma}}, // lm_head b16: mma, not swept (simt: 629.53 us, 29.0% of copy)
    {151936,
     2560,
     32,
     {16, 4, 2, 4,
      gemv_kind::mma}}, // lm_head b32: mma, not swept (simt: 1259.19 us, 14.6% of copy)
};

} // namespace

const char* gemv_kind_name(gemv_kind k) {
  switch (k) {
  case gemv_kind::simt:
    return "simt";
  case gemv_kind::bulk:
    return "bulk";
  case gemv_kind::mma:
    return "mma";
  }
  return "?";
}

gemv_config pick_gemv_config(int batch, int n, int k) {
  for (const auto& r : config_table)
    if (r.n == n && r.k == k && batch <= r.max_batch) return r.c;
  return heuristic_config(batch, n, k);
}

bool gemv_config_supported(const gemv_config& c, int batch, int n, int k) {
  if (!supported(c) || batch <= 0 || n <= 0 || k <= 0 || k % 8 != 0) return false;
  const long long tiles = row_tiles(c, n);
  return tiles * c.split_k <= 0x7fffffffLL && (c.split_k == 1 || tiles <= max_split_tiles);
}

std::size_t gemv_workspace_bytes(const gemv_config& c, int batch, int n, int k) {
  (void)k; // the partials hold whole output rows; K only sets how much each slice sums
  if (c.split_k <= 1 || batch <= 0 || n <= 0) return 0;
  return counter_bytes + static_cast<std::size_t>(c.split_k) * batch * n * sizeof(float);
}

cudaError_t launch_gemv_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                             int batch, int n, int k, const gemv_config& c, void* workspace,
                             cudaStream_t s) {
  if (!gemv_config_supported(c, batch, n, k) || !x || !w || !y) return cudaErrorInvalidValue;
  // 16-byte loads of every row: the bases must be 16-byte aligned (k % 8 == 0 does the rest).
  if (reinterpret_cast<std::uintptr_t>(x) % 16 != 0 ||
      reinterpret_cast<std::uintptr_t>(w) % 16 != 0)
    return cudaErrorInvalidValue;
  if (c.split_k > 1 && (!workspace || reinterpret_cast<std::uintptr_t>(workspace) % 16 != 0))
    return cudaErrorInvalidValue;
  const long long tiles = row_tiles(c, n);

  gemv_args a;
  a.w = w;
  a.n = n;
  a.k8 = k / 8;
  a.split = c.split_k;
  // Slices of an even number of chunks, so a slice starts on a 32-byte sector (the mma family's
  // lanes load chunk pairs from a slice's start).
  const int per_slice = (a.k8 + c.split_k - 1) / c.split_k;
  a.slice_len = (per_slice + 1) / 2 * 2;
  if (c.split_k > 1) {
    a.counters = static_cast<unsigned*>(workspace);
    a.slice_stride = static_cast<long long>(batch) * n;
  }
  const int blocks = static_cast<int>(tiles * c.split_k);
  const int group = max_group(c);
  // Batch groups in order; the last one takes the smallest kernel group that holds it (masked).
  for (int b0 = 0; b0 < batch; b0 += group) {
    const int nb = batch - b0 < group ? batch - b0 : group;
    a.x = x + static_cast<std::size_t>(b0) * k;
    a.y = y + static_cast<std::size_t>(b0) * n;
    a.nb = nb;
    if (c.split_k > 1)
      a.partial = reinterpret_cast<float*>(static_cast<char*>(workspace) + counter_bytes) +
                  static_cast<std::size_t>(b0) * n;
    const cudaError_t e = launch_group(a, next_pow2(nb), c, blocks, s);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

} // namespace kg
