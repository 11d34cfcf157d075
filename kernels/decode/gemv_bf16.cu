// Host side of the decode GEMV (kernels/decode/gemv_bf16.h): configuration checks, the workspace
// layout, batch groups, and the per-shape configuration table.
#include "kernels/decode/gemv_bf16.h"
#include "base/name_table.h"

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "kernels/decode/decode_math.cuh"
#include "kernels/decode/gemv_bf16_launch.h"

namespace kg {

cudaError_t gemv_detail::allow_dynamic_smem(const void* kernel, int bytes) {
  // The 48 KB without opt-in counts the kernel's static shared memory too (the split-K finish's
  // flag), so a ring of exactly 48 KB needs the opt-in: set it for every ring, once.
  if (bytes <= 0) return cudaSuccess;
  static std::mutex m;
  static std::set<std::pair<int, const void*>> done;
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  std::lock_guard<std::mutex> lock(m);
  if (done.count({dev, kernel})) return cudaSuccess;
  e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e == cudaSuccess) done.insert({dev, kernel});
  return e;
}

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
  if (!in(c.split_k, {1, 2, 3, 4, 8}) || !in(c.cluster, {0, 1})) return false;
  if (c.kind != gemv_kind::gemm && c.batch_warps != 1) return false;
  // Clusters of the split blocks (at most 8, the portable cluster size): the simt family and the
  // producer / consumer wgmma block, whose ring holds its partials (not the mma family, whose
  // registers decide its waves: gemv_bf16_mma.cu).
  if (c.cluster &&
      (c.split_k == 1 || (c.kind != gemv_kind::simt && c.kind != gemv_kind::wgmma_ws &&
                          c.kind != gemv_kind::wgmma_pk && c.kind != gemv_kind::wgmma_sw)))
    return false;
  // Split 3 (a 40-tile projection in 120 blocks: one wave) where K slices are whole k tiles.
  const bool ring_family = c.kind == gemv_kind::gemm || c.kind == gemv_kind::wgmma ||
                           c.kind == gemv_kind::wgmma_tma || c.kind == gemv_kind::wgmma_ws ||
                           c.kind == gemv_kind::wgmma_pk || c.kind == gemv_kind::wgmma_sw;
  if (c.split_k == 3 && !ring_family) return false;
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
  case gemv_kind::packed:
    // unroll x warps_per_block <= 32: the pipelined weights then fit the registers (no spills).
    return c.rows_per_warp == 16 && in(c.unroll, {2, 4}) && in(c.warps_per_block, {4, 8, 16}) &&
           c.unroll * c.warps_per_block <= 32;
  case gemv_kind::sweep:
    return in(c.rows_per_warp, {1, 2, 3, 4}) && in(c.unroll, {1, 2, 4}) &&
           in(c.warps_per_block, {8, 16}) && c.split_k == 1 && !c.cluster;
  case gemv_kind::tsweep:
    return in(c.rows_per_warp, {1, 2, 3, 4}) && in(c.unroll, {1, 2}) &&
           in(c.warps_per_block, {4, 8, 16}) && !c.cluster &&
           gemv_detail::sweep_grid_unit * c.rows_per_warp % c.split_k == 0;
  case gemv_kind::gemm:
    return in(c.rows_per_warp, {16, 32, 64}) && in(c.warps_per_block, {4, 8}) &&
           in(c.batch_warps, {1, 2}) && in(c.unroll, {3, 4}) && !c.cluster;
  case gemv_kind::wgmma:
  case gemv_kind::wgmma_tma:
    return in(c.rows_per_warp, {64, 128}) && in(c.warps_per_block, {4, 8}) &&
           in(c.unroll, {3, 4}) && !c.cluster;
  case gemv_kind::wgmma_ws:
    return in(c.rows_per_warp, {64, 128}) && in(c.warps_per_block, {4, 8}) &&
           in(c.unroll, {6, 8, 12, 16});
  case gemv_kind::wgmma_pk:
    return in(c.rows_per_warp, {64, 128}) && in(c.warps_per_block, {4, 8}) &&
           in(c.unroll, {4, 6, 8});
  case gemv_kind::wgmma_sw:
    return in(c.rows_per_warp, {40, 48, 64, 80, 96, 128}) && c.warps_per_block == 4 &&
           in(c.unroll, {4, 6, 8});
  }
  return false;
}

// The families on the warpgroup MMA: one tile, four ways of filling the ring, and the tile with
// the operands swapped.
bool is_wgmma(gemv_kind k) {
  return k == gemv_kind::wgmma || k == gemv_kind::wgmma_tma || k == gemv_kind::wgmma_ws ||
         k == gemv_kind::wgmma_pk || k == gemv_kind::wgmma_sw;
}

int next_pow2(int v) {
  int p = 1;
  while (p < v)
    p *= 2;
  return p;
}

// The gemm family's batch tile for a group of nb rows: a power of two, two n8 tiles a warp at
// least (ldmatrix loads them in pairs).
int gemm_batch_tile(const gemv_config& c, int nb) {
  const int least = 16 * c.batch_warps;
  return nb <= least ? least : next_pow2(nb);
}

// The gemm family's limits at its largest batch tile (a launch's groups are never larger than
// the first): accumulators, tile rows, ring bytes.
bool gemm_fits(const gemv_config& c, int batch) {
  const int group = batch < gemv_detail::gemm_max_batch ? batch : gemv_detail::gemm_max_batch;
  const int bn = gemm_batch_tile(c, group);
  const int rows = gemv_detail::gemm_tile_rows(c.rows_per_warp, c.warps_per_block, c.batch_warps);
  return bn <= gemv_detail::gemm_max_batch &&
         c.rows_per_warp / 16 * (bn / (8 * c.batch_warps)) <= gemv_detail::gemm_max_mma_tiles &&
         rows <= gemv_detail::gemm_max_tile_rows &&
         gemv_detail::gemm_smem_bytes(rows, bn, c.unroll) <= gemv_detail::gemm_max_smem_bytes;
}

// The wgmma families' limits at their largest batch tile: accumulators, tile rows, ring bytes.
bool wgmma_fits(const gemv_config& c, int batch) {
  const int group = batch < gemv_detail::gemm_max_batch ? batch : gemv_detail::gemm_max_batch;
  const int bn = gemm_batch_tile(c, group);
  const int rows = gemv_detail::wgmma_tile_rows(c.rows_per_warp, c.warps_per_block);
  if (c.kind == gemv_kind::wgmma_sw) { // the batch as M: 64 rows a wgmma, the x tile padded
    const int m = bn <= 64 ? 64 : 128;
    return bn <= gemv_detail::gemm_max_batch &&
           m / 64 * rows / 2 <= gemv_detail::wgmma_max_accumulators &&
           c.unroll * (rows + m) * gemv_detail::gemm_tile_chunks * 16 + 1024 <=
               gemv_detail::wgmma_ws_max_smem_bytes;
  }
  return bn <= gemv_detail::gemm_max_batch &&
         c.rows_per_warp / 64 * bn / 2 <= gemv_detail::wgmma_max_accumulators &&
         rows <= gemv_detail::gemm_max_tile_rows &&
         gemv_detail::wgmma_smem_bytes(rows, bn, c.unroll) <=
             (c.kind == gemv_kind::wgmma_ws || c.kind == gemv_kind::wgmma_pk
                  ? gemv_detail::wgmma_ws_max_smem_bytes
                  : gemv_detail::wgmma_max_smem_bytes);
}

// Rows of one block: the mma and packed families' warps share one 16-row tile; the gemm
// family's may sit side by side along the batch.
long long tile_rows(const gemv_config& c) {
  if (c.kind == gemv_kind::gemm)
    return gemv_detail::gemm_tile_rows(c.rows_per_warp, c.warps_per_block, c.batch_warps);
  if (is_wgmma(c.kind)) return gemv_detail::wgmma_tile_rows(c.rows_per_warp, c.warps_per_block);
  return c.kind == gemv_kind::mma || c.kind == gemv_kind::packed
             ? c.rows_per_warp
             : c.rows_per_warp * c.warps_per_block;
}

// Blocks of a launch per K slice: the sweep family's grid is fixed (132 x rows_per_warp), and so
// is the tile sweep's, split included (its row lanes).
long long row_tiles(const gemv_config& c, int n) {
  if (c.kind == gemv_kind::sweep) return gemv_detail::sweep_grid_unit * c.rows_per_warp;
  if (c.kind == gemv_kind::tsweep)
    return gemv_detail::sweep_grid_unit * c.rows_per_warp / c.split_k;
  return (n + tile_rows(c) - 1) / tile_rows(c);
}

// Whether a launch needs the workspace: split K's slices.
bool needs_workspace(const gemv_config& c) {
  return c.split_k > 1 && !c.cluster;
}

// Chunks per K slice as launch_gemv_bf16 cuts them: even, so a slice starts on a 32-byte sector
// (the mma family's lanes load chunk pairs from a slice's start).
int slice_chunks(int k8, int split) {
  const int per_slice = (k8 + split - 1) / split;
  return (per_slice + 1) / 2 * 2;
}

// The gemm family's K slices: whole k tiles.
int gemm_slice_chunks(int k8, int split) {
  const int tiles = (k8 + gemv_detail::gemm_tile_chunks - 1) / gemv_detail::gemm_tile_chunks;
  return (tiles + split - 1) / split * gemv_detail::gemm_tile_chunks;
}

cudaError_t launch_group(const gemv_args& a, int bg, const gemv_config& c, int blocks,
                         cudaStream_t s) {
  if (c.kind == gemv_kind::bulk)
    return gemv_detail::launch_gemv_bulk(a, bg, c.rows_per_warp, c.unroll, c.warps_per_block,
                                         blocks, s);
  if (c.kind == gemv_kind::sweep)
    return gemv_detail::launch_gemv_sweep(a, bg, c.unroll, c.warps_per_block, blocks, s);
  if (c.kind == gemv_kind::tsweep)
    return gemv_detail::launch_gemv_tsweep(a, c.unroll, c.warps_per_block, blocks, s);
  if (c.kind == gemv_kind::gemm)
    return gemv_detail::launch_gemv_gemm(a, gemm_batch_tile(c, a.nb), c.rows_per_warp,
                                         c.batch_warps, c.warps_per_block, c.unroll, blocks, s);
  if (c.kind == gemv_kind::wgmma)
    return gemv_detail::launch_gemv_wgmma(a, gemm_batch_tile(c, a.nb), c.rows_per_warp,
                                          c.warps_per_block, c.unroll, blocks, s);
  if (c.kind == gemv_kind::wgmma_tma)
    return gemv_detail::launch_gemv_wgmma_tma(a, gemm_batch_tile(c, a.nb), c.rows_per_warp,
                                              c.warps_per_block, c.unroll, blocks, s);
  if (c.kind == gemv_kind::wgmma_ws)
    return gemv_detail::launch_gemv_wgmma_ws(a, gemm_batch_tile(c, a.nb), c.rows_per_warp,
                                             c.warps_per_block, c.unroll, blocks, s);
  if (c.kind == gemv_kind::wgmma_pk)
    return gemv_detail::launch_gemv_wgmma_pk(a, gemm_batch_tile(c, a.nb), c.rows_per_warp,
                                             c.warps_per_block, c.unroll, blocks, s);
  if (c.kind == gemv_kind::wgmma_sw)
    return gemv_detail::launch_gemv_wgmma_sw(a, gemm_batch_tile(c, a.nb), c.rows_per_warp, c.unroll,
                                             blocks, s);
  const int nt = bg <= 8 ? 1 : bg <= 16 ? 2 : 4; // mma, packed: 8-column batch tiles
  if (c.kind == gemv_kind::mma)
    return gemv_detail::launch_gemv_mma(a, nt, c.unroll, c.warps_per_block, blocks, s);
  if (c.kind == gemv_kind::packed)
    return gemv_detail::launch_gemv_packed(a, nt, c.unroll, c.warps_per_block, blocks, s);
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
// the same shape). Each row is the fastest configuration of a kg_bench_gemv_sweep run on the H200
// (the L2 left empty before each sample; the sweep prints its best rows in this form).
// docs/performance.md (GEMV configurations) has each row's time and fraction of the copy
// bandwidth, the best of each family, and the run it comes from.
struct table_row {
  int n, k, max_batch;
  gemv_config c; // rows_per_warp, warps_per_block, unroll, split_k, kind
};
// clang-format off
constexpr table_row config_table[] = {
    {2560, 9728, 1, {2, 8, 2, 1, gemv_kind::sweep}}, // down b1
    {2560, 9728, 2, {2, 8, 1, 1, gemv_kind::sweep}}, // down b2
    {2560, 9728, 4, {16, 8, 2, 1, gemv_kind::packed}}, // down b4
    {2560, 9728, 8, {16, 8, 2, 1, gemv_kind::packed}}, // down b8
    {2560, 9728, 16, {16, 8, 2, 1, gemv_kind::packed}}, // down b16
    {2560, 9728, 32, {16, 4, 4, 8, gemv_kind::gemm, 0, 2}}, // down b32
    {2560, 9728, 64, {40, 4, 8, 2, gemv_kind::wgmma_sw, 1}}, // down b64
    {2560, 9728, 128, {64, 4, 6, 3, gemv_kind::wgmma_ws}}, // down b128
    {6144, 2560, 1, {16, 4, 2, 1, gemv_kind::packed}}, // qkv b1
    {6144, 2560, 2, {16, 4, 2, 1, gemv_kind::mma}}, // qkv b2
    {6144, 2560, 4, {16, 4, 2, 1, gemv_kind::mma}}, // qkv b4
    {6144, 2560, 8, {16, 4, 2, 1, gemv_kind::packed}}, // qkv b8
    {6144, 2560, 16, {64, 4, 8, 1, gemv_kind::wgmma_pk}}, // qkv b16
    {6144, 2560, 32, {64, 4, 8, 1, gemv_kind::wgmma_pk}}, // qkv b32
    {6144, 2560, 64, {48, 4, 4, 2, gemv_kind::wgmma_sw, 1}}, // qkv b64
    {6144, 2560, 128, {48, 4, 4, 2, gemv_kind::wgmma_sw, 1}}, // qkv b128
    {2560, 4096, 1, {4, 16, 1, 1, gemv_kind::sweep}}, // o_proj b1
    {2560, 4096, 2, {4, 8, 2, 1, gemv_kind::sweep}}, // o_proj b2
    {2560, 4096, 4, {16, 8, 2, 1, gemv_kind::mma}}, // o_proj b4
    {2560, 4096, 8, {16, 8, 2, 1, gemv_kind::mma}}, // o_proj b8
    {2560, 4096, 16, {64, 4, 4, 8, gemv_kind::wgmma}}, // o_proj b16
    {2560, 4096, 32, {16, 4, 4, 8, gemv_kind::gemm, 0, 2}}, // o_proj b32
    {2560, 4096, 64, {40, 4, 8, 2, gemv_kind::wgmma_sw, 1}}, // o_proj b64
    {2560, 4096, 128, {40, 4, 6, 2, gemv_kind::wgmma_sw, 1}}, // o_proj b128
    {19456, 2560, 1, {128, 8, 4, 1, gemv_kind::wgmma_pk}}, // gate_up b1
    {19456, 2560, 2, {128, 8, 4, 1, gemv_kind::wgmma_pk}}, // gate_up b2
    {19456, 2560, 4, {128, 8, 4, 1, gemv_kind::wgmma_pk}}, // gate_up b4
    {19456, 2560, 8, {128, 8, 4, 1, gemv_kind::wgmma_pk}}, // gate_up b8
    {19456, 2560, 16, {64, 4, 4, 1, gemv_kind::wgmma_pk}}, // gate_up b16
    {19456, 2560, 32, {64, 4, 4, 1, gemv_kind::wgmma_pk}}, // gate_up b32
    {19456, 2560, 64, {128, 8, 4, 1, gemv_kind::wgmma_pk}}, // gate_up b64
    {19456, 2560, 128, {64, 4, 3, 1, gemv_kind::wgmma_tma}}, // gate_up b128
    {151936, 2560, 1, {4, 8, 2, 1}}, // lm_head b1
    {151936, 2560, 2, {64, 4, 6, 1, gemv_kind::wgmma_pk}}, // lm_head b2
    {151936, 2560, 4, {64, 4, 6, 1, gemv_kind::wgmma_pk}}, // lm_head b4
    {151936, 2560, 8, {64, 4, 4, 1, gemv_kind::wgmma_pk}}, // lm_head b8
    {151936, 2560, 16, {64, 4, 4, 1, gemv_kind::wgmma_pk}}, // lm_head b16
    {151936, 2560, 32, {64, 4, 4, 1, gemv_kind::wgmma_pk}}, // lm_head b32
    {151936, 2560, 64, {64, 4, 4, 1, gemv_kind::wgmma_pk}}, // lm_head b64
    {151936, 2560, 128, {64, 4, 4, 1, gemv_kind::wgmma_tma}}, // lm_head b128
};
// clang-format on

} // namespace

namespace {

constexpr name_table<gemv_kind, 12> gemv_kind_names{{
    {gemv_kind::simt, "simt"},
    {gemv_kind::bulk, "bulk"},
    {gemv_kind::mma, "mma"},
    {gemv_kind::sweep, "sweep"},
    {gemv_kind::tsweep, "tsweep"},
    {gemv_kind::packed, "packed"},
    {gemv_kind::gemm, "gemm"},
    {gemv_kind::wgmma, "wgmma"},
    {gemv_kind::wgmma_tma, "wgmma_tma"},
    {gemv_kind::wgmma_ws, "wgmma_ws"},
    {gemv_kind::wgmma_pk, "wgmma_pk"},
    {gemv_kind::wgmma_sw, "wgmma_sw"},
}};

} // namespace

const char* gemv_kind_name(gemv_kind k) { return name_of(gemv_kind_names, k, "?").data(); }

std::string gemv_config_text(const gemv_config& c) {
  std::string s = std::string(gemv_kind_name(c.kind)) + ":" + std::to_string(c.rows_per_warp) +
                  "," + std::to_string(c.warps_per_block) + "," + std::to_string(c.unroll) + "," +
                  std::to_string(c.split_k);
  if (c.cluster != 0 || c.batch_warps != 1) s += "," + std::to_string(c.cluster);
  if (c.batch_warps != 1) s += "," + std::to_string(c.batch_warps);
  return s;
}

std::optional<gemv_config> parse_gemv_config(std::string_view text) {
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const std::optional<gemv_kind> kind = parse_name(gemv_kind_names, text.substr(0, colon));
  if (!kind) return std::nullopt;
  // 4 to 6 comma-separated decimal fields, each a whole int (from_chars must use every byte).
  std::vector<int> fields;
  std::string_view rest = text.substr(colon + 1);
  for (;;) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    int v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc{} || end != item.data() + item.size()) return std::nullopt;
    fields.push_back(v);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  if (fields.size() < 4 || fields.size() > 6) return std::nullopt;
  gemv_config c;
  c.kind = *kind;
  c.rows_per_warp = fields[0];
  c.warps_per_block = fields[1];
  c.unroll = fields[2];
  c.split_k = fields[3];
  c.cluster = fields.size() > 4 ? fields[4] : 0;
  c.batch_warps = fields.size() > 5 ? fields[5] : 1;
  return c;
}

gemv_layout gemv_weight_layout(const gemv_config& c) {
  switch (c.kind) {
  case gemv_kind::packed:
    return gemv_layout::packed;
  case gemv_kind::wgmma_pk:
    return gemv_layout::wgmma_tiles;
  default:
    return gemv_layout::row_major;
  }
}

gemv_layout gemv_gated_weight_layout(const gemv_config& c) {
  return c.kind == gemv_kind::wgmma_pk ? gemv_layout::wgmma_tiles_paired : gemv_weight_layout(c);
}

bool gemv_reads_packed(const gemv_config& c) {
  return gemv_weight_layout(c) != gemv_layout::row_major;
}

std::size_t gemv_packed_bytes(gemv_layout l, int n, int k) {
  if (n <= 0 || k <= 0) return 0;
  switch (l) {
  case gemv_layout::packed:
    if (k % 64 != 0) return 0;
    return static_cast<std::size_t>((n + 15) / 16) * 16 * static_cast<std::size_t>(k) * 2;
  case gemv_layout::wgmma_tiles:
  case gemv_layout::wgmma_tiles_paired:
    if (k % 8 != 0 || (l == gemv_layout::wgmma_tiles_paired && n % 16 != 0)) return 0;
    return static_cast<std::size_t>(gemv_detail::wgmma_tiles_bytes(n, k));
  default:
    return 0;
  }
}

cudaError_t pack_gemv_weights(gemv_layout l, const __nv_bfloat16* w, __nv_bfloat16* packed, int n,
                              int k, cudaStream_t s) {
  if (gemv_packed_bytes(l, n, k) == 0 || !w || !packed ||
      reinterpret_cast<std::uintptr_t>(w) % 16 != 0 ||
      reinterpret_cast<std::uintptr_t>(packed) % 16 != 0)
    return cudaErrorInvalidValue;
  return l == gemv_layout::packed ? gemv_detail::launch_pack_weights(w, packed, n, k, s)
                                  : gemv_detail::launch_pack_wgmma_tiles(
                                        w, packed, n, k, s, l == gemv_layout::wgmma_tiles_paired);
}

// The row of `table` for this shape and batch (the first whose max_batch covers it), if any.
template <std::size_t N>
const table_row* row_for(const table_row (&table)[N], int batch, int n, int k) {
  for (const auto& r : table)
    if (r.n == n && r.k == k && batch <= r.max_batch) return &r;
  return nullptr;
}

gemv_config pick_gemv_config(int batch, int n, int k) {
  const table_row* r = row_for(config_table, batch, n, k);
  return r ? r->c : heuristic_config(batch, n, k);
}

// The step's own rows: where a configuration other than the table's made the decode step faster,
// side by side in one process (kg_bench_decode_step --gemv; docs/performance.md, *The batch-1
// step's own GEMV rows*). Alone, packed (qkv) and wgmma_pk (gate_up) win these shapes on the
// H200; inside the step at batch 1 the simt rows do (their first weight loads are issued while
// the kernel ahead drains, and gate_up takes the SiLU gate as its epilogue). They also take a
// folded norm, which the table's rows cannot (pick_gemv_config_folded).
// clang-format off
constexpr table_row step_table[] = {
    {6144, 2560, 1, {2, 4, 2, 1}},  // qkv b1
    {19456, 2560, 1, {2, 4, 2, 1}}, // gate_up b1
};
// clang-format on

gemv_config pick_gemv_config_in_step(int batch, int n, int k) {
  const table_row* r = row_for(step_table, batch, n, k);
  return r ? r->c : pick_gemv_config(batch, n, k);
}

bool gemv_takes_folded_norm(const gemv_config& c, int batch, int n, int k, bool gated) {
  static const __nv_bfloat16 any_weight{}; // (whether a fold is supported does not depend on it)
  gemv_fusion norm;
  norm.norm_weight = &any_weight;
  return gemv_config_supported(c, batch, n, k) && gemv_fusion_supported(c, norm, k, gated) &&
         (!gated || gemv_gated_supported(c, batch, n, k));
}

std::optional<gemv_config> pick_gemv_config_folded(int batch, int n, int k, bool gated) {
  const gemv_config c = pick_gemv_config_in_step(batch, n, k);
  if (gemv_takes_folded_norm(c, batch, n, k, gated)) return c;
  return std::nullopt;
}

bool gemv_config_supported(const gemv_config& c, int batch, int n, int k) {
  if (!supported(c) || batch <= 0 || n <= 0 || k <= 0 || k % 8 != 0) return false;
  if (c.kind == gemv_kind::packed && k % 64 != 0) return false;
  if (c.kind == gemv_kind::sweep && k / 8 > 8 * 32 * c.warps_per_block) return false;
  if (c.kind == gemv_kind::gemm && !gemm_fits(c, batch)) return false;
  if (is_wgmma(c.kind) && !wgmma_fits(c, batch)) return false;
  if (c.kind == gemv_kind::tsweep) {
    const int chunks =
        gemv_detail::tsweep_chunks_per_lane(slice_chunks(k / 8, c.split_k), c.warps_per_block);
    if (chunks > 8 || chunks * c.unroll > 8) return false;
  }
  const long long tiles = row_tiles(c, n);
  return tiles * c.split_k <= 0x7fffffffLL &&
         (c.split_k == 1 || c.cluster || tiles <= max_split_tiles);
}

std::size_t gemv_workspace_bytes(const gemv_config& c, int batch, int n, int k) {
  (void)k; // the partials hold whole output rows; K only sets how much each slice sums
  if (batch <= 0 || n <= 0 || !needs_workspace(c)) return 0;
  return counter_bytes + static_cast<std::size_t>(c.split_k) * batch * n * sizeof(float);
}

bool gemv_gated_supported(const gemv_config& c, int batch, int n, int k) {
  const bool pairs_meet = (c.kind == gemv_kind::simt && c.rows_per_warp == 2 && n % 2 == 0) ||
                          (c.kind == gemv_kind::wgmma_pk && n % 16 == 0);
  return pairs_meet && c.split_k == 1 && !c.cluster && gemv_config_supported(c, batch, n, k);
}

bool gemv_fusion_supported(const gemv_config& c, const gemv_fusion& f, int k, bool gated) {
  if (f.add_to_y && gated) return false;
  return !f.norm_weight ||
         (c.kind == gemv_kind::simt && k <= 4 * 8 * decode::math::rmsnorm_threads);
}

namespace {

// Both entry points: gated, y is [batch][n / 2] (launch_gemv_bf16_gated).
cudaError_t launch_any(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, int batch,
                       int n, int k, const gemv_config& c, void* workspace, cudaStream_t s,
                       bool programmatic, bool gated, const gemv_fusion* fusion) {
  if (!gemv_config_supported(c, batch, n, k) || !x || !w || !y) return cudaErrorInvalidValue;
  const gemv_fusion f = fusion ? *fusion : gemv_fusion{};
  if (!gemv_fusion_supported(c, f, k, gated) ||
      reinterpret_cast<std::uintptr_t>(f.norm_weight) % 16 != 0)
    return cudaErrorInvalidValue;
  // 16-byte loads of every row: the bases must be 16-byte aligned (k % 8 == 0 does the rest).
  if (reinterpret_cast<std::uintptr_t>(x) % 16 != 0 ||
      reinterpret_cast<std::uintptr_t>(w) % 16 != 0)
    return cudaErrorInvalidValue;
  const bool ws = needs_workspace(c);
  if (ws && (!workspace || reinterpret_cast<std::uintptr_t>(workspace) % 16 != 0))
    return cudaErrorInvalidValue;
  const long long tiles = row_tiles(c, n);

  gemv_args a;
  a.w = w;
  a.n = n;
  a.k8 = k / 8;
  a.split = c.split_k;
  a.cluster = c.cluster;
  a.gated = gated ? 1 : 0;
  a.norm_w = f.norm_weight;
  a.norm_eps = f.norm_eps;
  a.add_to_y = f.add_to_y ? 1 : 0;
  a.programmatic = programmatic;
  a.slice_len = c.kind == gemv_kind::gemm || is_wgmma(c.kind) // whole k tiles
                    ? gemm_slice_chunks(a.k8, c.split_k)
                    : slice_chunks(a.k8, c.split_k);
  if (ws) {
    a.counters = static_cast<unsigned*>(workspace);
    a.slice_stride = static_cast<long long>(batch) * n;
  }
  const int blocks = static_cast<int>(tiles * c.split_k);
  const int group = gemv_batch_group(c);
  const int y_cols = gated ? n / 2 : n;
  // Batch groups in order; the last one takes the smallest kernel group that holds it (masked).
  for (int b0 = 0; b0 < batch; b0 += group) {
    const int nb = batch - b0 < group ? batch - b0 : group;
    a.x = x + static_cast<std::size_t>(b0) * k;
    a.y = y + static_cast<std::size_t>(b0) * y_cols;
    a.nb = nb;
    if (ws)
      a.partial = reinterpret_cast<float*>(static_cast<char*>(workspace) + counter_bytes) +
                  static_cast<std::size_t>(b0) * n;
    const cudaError_t e = launch_group(a, next_pow2(nb), c, blocks, s);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

} // namespace

cudaError_t launch_gemv_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                             int batch, int n, int k, const gemv_config& c, void* workspace,
                             cudaStream_t s, bool programmatic, const gemv_fusion* fusion) {
  return launch_any(x, w, y, batch, n, k, c, workspace, s, programmatic, false, fusion);
}

cudaError_t launch_gemv_bf16_gated(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                                   int batch, int n, int k, const gemv_config& c, cudaStream_t s,
                                   bool programmatic, const gemv_fusion* fusion) {
  if (!gemv_gated_supported(c, batch, n, k)) return cudaErrorInvalidValue;
  return launch_any(x, w, y, batch, n, k, c, nullptr, s, programmatic, true, fusion);
}

// The largest batch group a kernel exists for: simt, rows_per_warp * group <= 32 accumulators
// per lane; bulk, at most 8 of those (larger batches are the mma family's); mma, four 8-column
// batch tiles; gemm, a 128-row batch tile.
int gemv_batch_group(const gemv_config& c) {
  switch (c.kind) {
  case gemv_kind::bulk:
    return 32 / c.rows_per_warp < 8 ? 32 / c.rows_per_warp : 8;
  case gemv_kind::mma:
  case gemv_kind::packed:
    return 32;
  case gemv_kind::sweep:
    return 2;
  case gemv_kind::tsweep:
    return 8;
  case gemv_kind::gemm:
  case gemv_kind::wgmma:
  case gemv_kind::wgmma_tma:
  case gemv_kind::wgmma_ws:
  case gemv_kind::wgmma_pk:
  case gemv_kind::wgmma_sw:
    return gemv_detail::gemm_max_batch;
  default:
    return 32 / c.rows_per_warp;
  }
}

} // namespace kg
