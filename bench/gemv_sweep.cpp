// Every configuration of the decode GEMV (kernels/decode/gemv_bf16.h) on the Qwen3-4B projections
// at batch 1, 2, 4, 8, 16 and 32, timed by kernelgate's harness (L2 flushed before each sample)
// and expressed as a fraction of the device-to-device copy bandwidth measured in the same run,
// as bench/decode_kernels.cpp does: bandwidth = the minimum bytes (weights, x and y once) /
// median time; copy bandwidth = (read + write) / median time of a 1 GiB cudaMemcpyAsync.
//
// Before it is timed, each configuration's output is checked against an independent float32
// reference (bench/gemv_reference.cu) to a bf16 tolerance, and run twice (output poisoned before
// each run) for bitwise identity. One row per configuration is printed as it is measured; the
// end prints the best configuration per (shape, batch) as rows of pick_gemv_config's table.
//
// Nine configuration families are timed side by side (gemv_kind, gemv_bf16.h): simt (weights
// through registers, float32 FMAs), bulk (cp.async.bulk ring in shared memory), mma (tensor
// cores, weights as the A operand), sweep (a fixed grid computing whole rows, batch 1-2), tsweep
// (tensor cores over the sweep's fixed grid, batch up to 8), packed (the mma kernel over the
// weights' packed copy, made once per shape by pack_gemv_weights and not timed), gemm (a
// skinny GEMM with both operands staged in shared memory, batch 16-128), wgmma (the gemm
// family's ring read by Hopper's warpgroup instructions), wgmma_tma (that kernel with its ring
// filled by TMA tensor copies), wgmma_ws (those tiles with a producer warpgroup and a deep
// ring) and wgmma_pk (that block over the weights' wgmma_tiles copy, made once per shape and not
// timed, by plain bulk copies).
//
// Pruning (off with --full): configurations that need several launches for the batch, those
// whose lanes, blocks or warps would get less than one unrolled step per K slice, and split-K
// factors whose half already gives every SM ~64 warps, are skipped; warps_per_block 8 is swept
// first and the three best of those are then re-timed with 4 and 16 warps per block (where the
// family has them). lm_head is timed with a handful of configurations only.
//
// cuBLAS beside them (issue 24's like-for-like claim): for every (shape, batch) the same product
// through cublasGemmEx (bf16 in and out, float32 accumulation, cuBLAS's default algorithm;
// kernels/decode/gemm_cublas.h, the call the decode engine makes above the GEMV's batch), checked
// and timed by the same harness, cold L2 and all, in the same process. The end prints ours against
// it per (shape, batch). --backend counters times both by the CUPTI range profiler's kernel
// duration (what ncu reports), which leaves launch gaps out of both.
//
//   kg_bench_gemv_sweep [--quick] [--full] [--list] [--max-wall S] [--shapes a,b] [--batches 1,8]
//                       [--cluster 0|1|both] [--no-cublas] [--backend NAME]
//     --quick   the down projection at batch 1 and 8 only (every family)
//     --no-ceiling  skip each weight's read-ceiling rows (a plain contiguous read of it)
//     --kinds   simt, bulk, mma, sweep, tsweep, packed, gemm, wgmma, wgmma_tma, wgmma_ws,
//               wgmma_pk, wgmma_sw (a comma list):
//               time only these families (and the table's current configuration)
//     --shapes  down, qkv, o_proj, gate_up, lm_head (a comma list); --batches 1..128 (a list)
//     --no-cublas  leave cuBLAS out
//     --check-only  check every configuration's output (and cuBLAS's), time nothing: no copy
//               bandwidth, no read ceiling, no blocking kernel -- the mode to run under Nsight
//               Compute, whose serialized launches the harness's timing cannot take
//     --backend auto, events, graph, cupti or counters (timing/gpu_timer.h; default auto)
//     --cluster  split-K simt and mma configurations with the workspace finish (0), the cluster
//               finish (1, gemv_config::cluster) or both (default)
//     --list    print the configurations that would be timed, and their number (no GPU needed)
//     --max-wall S   wall-clock cap per configuration's timing (default 0.15 s)
// Exit: 0 all checks passed, 1 a configuration was wrong or failed, 2 bad usage, 3 no GPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <cuda_bf16.h>

#include "bench/gemv_reference.h"
#include "gpu/cuda_check.h"
#include "gpu/device_buffer.h"
#include "gpu/device_info.h"
#include "kernels/decode/gemm_cublas.h"
#include "kernels/decode/gemv_bf16.h"
#include "timing/copy_bandwidth.h"
#include "timing/gpu_timer.h"

using namespace kg;

namespace {

struct shape_def {
  std::string name;
  int n = 0, k = 0;
  bool few_configs = false; // lm_head: 389M weights, a handful of configurations
};

struct sweep_options {
  bool quick = false, full = false, list = false;
  double max_wall = 0.15;
  std::vector<std::string> shapes;    // --shapes: these projections only
  std::vector<int> batches;           // --batches: these batch sizes only
  std::vector<int> clusters = {0, 1}; // --cluster 0|1|both
  bool no_ceiling = false;            // --no-ceiling: skip the read-ceiling rows
  std::vector<std::string> kinds;     // --kinds: these families only (the table's row always)
  bool cublas = true;                 // --no-cublas: leave cuBLAS out
  bool check_only = false;            // --check-only: each output checked, nothing timed
  timing_backend backend = timing_backend::automatic;
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// "simt rpw2 u2 w8 s4", "bulk rpw2 st4 w8 s2" (st: ring stages), "mma u4 w8 s2", "sweep g264
// u2 w16 s1" (g: the grid), " cl" for the cluster finish.
std::string config_name(const gemv_config& c) {
  std::ostringstream o;
  o << gemv_kind_name(c.kind) << " ";
  switch (c.kind) {
  case gemv_kind::simt:
    o << "rpw" << c.rows_per_warp << " u" << c.unroll;
    break;
  case gemv_kind::bulk:
    o << "rpw" << c.rows_per_warp << " st" << c.unroll;
    break;
  case gemv_kind::mma:
  case gemv_kind::packed:
    o << "u" << c.unroll;
    break;
  case gemv_kind::sweep:
  case gemv_kind::tsweep:
    o << "g" << 132 * c.rows_per_warp << " u" << c.unroll;
    break;
  case gemv_kind::gemm:
    o << "rpw" << c.rows_per_warp << " st" << c.unroll << " bw" << c.batch_warps;
    break;
  case gemv_kind::wgmma:
  case gemv_kind::wgmma_tma:
  case gemv_kind::wgmma_ws:
  case gemv_kind::wgmma_pk:
    o << "rpg" << c.rows_per_warp << " st" << c.unroll;
    break;
  case gemv_kind::wgmma_sw:
    o << "tn" << c.rows_per_warp << " st" << c.unroll;
    break;
  }
  o << " w" << c.warps_per_block << " s" << c.split_k;
  if (c.cluster) o << " cl";
  return o.str();
}

// pick_gemv_config's table spelling: {rows_per_warp, warps_per_block, unroll, split_k[, kind[,
// cluster[, batch_warps]]]}.
std::string table_config(const gemv_config& c) {
  std::ostringstream o;
  o << "{" << c.rows_per_warp << ", " << c.warps_per_block << ", " << c.unroll << ", " << c.split_k;
  if (c.kind != gemv_kind::simt || c.cluster) o << ", gemv_kind::" << gemv_kind_name(c.kind);
  if (c.cluster || c.batch_warps != 1) o << ", " << c.cluster;
  if (c.batch_warps != 1) o << ", " << c.batch_warps;
  o << "}";
  return o.str();
}

bool same(const gemv_config& a, const gemv_config& b) {
  return a.kind == b.kind && a.rows_per_warp == b.rows_per_warp && a.unroll == b.unroll &&
         a.warps_per_block == b.warps_per_block && a.split_k == b.split_k &&
         a.cluster == b.cluster && a.batch_warps == b.batch_warps;
}

// Rows of one block (the mma family's warps share one 16-row tile; a sweep block computes about
// n / grid rows, a tile-sweep block about 16 x ceil(tiles / row lanes)).
int block_rows(const gemv_config& c, int n) {
  if (c.kind == gemv_kind::sweep) return (n + 132 * c.rows_per_warp - 1) / (132 * c.rows_per_warp);
  if (c.kind == gemv_kind::tsweep) {
    const int lanes = 132 * c.rows_per_warp / c.split_k;
    return 16 * (((n + 15) / 16 + lanes - 1) / lanes);
  }
  if (c.kind == gemv_kind::gemm) return c.rows_per_warp * c.warps_per_block / c.batch_warps;
  if (c.kind == gemv_kind::wgmma || c.kind == gemv_kind::wgmma_tma ||
      c.kind == gemv_kind::wgmma_ws || c.kind == gemv_kind::wgmma_pk ||
      c.kind == gemv_kind::wgmma_sw)
    return c.rows_per_warp * c.warps_per_block / 4;
  return c.kind == gemv_kind::mma || c.kind == gemv_kind::packed
             ? c.rows_per_warp
             : c.rows_per_warp * c.warps_per_block;
}

// Worth timing: the whole batch in one launch (a batch above the kernel's group streams the
// weights once per group), each lane (simt) gets at least `unroll` chunks of its K slice (else
// the unrolled loop never runs), each bulk block at least two stages per slice and each mma warp
// at least one super-step, and a split-K factor is only tried while half of it leaves the GPU
// short of warps.
bool worth_timing(const gemv_config& c, const shape_def& s, int batch, int sm_count) {
  if (batch > gemv_batch_group(c)) return false;
  const double slice_chunks = s.k / 8.0 / c.split_k;
  switch (c.kind) {
  case gemv_kind::simt:
    if (slice_chunks / 32.0 < c.unroll && !(c.split_k == 1 && c.unroll == 2)) return false;
    break;
  case gemv_kind::bulk:
    if (c.split_k > 1 && slice_chunks < 2 * 64) return false;
    break;
  case gemv_kind::mma:
  case gemv_kind::packed:
    if (c.split_k > 1 && slice_chunks < 8.0 * c.unroll * c.warps_per_block) return false;
    break;
  case gemv_kind::sweep:
    break;
  case gemv_kind::tsweep: // its grid is fixed: every split is worth a look
    return true;
  case gemv_kind::gemm:      // batch 8 up (the TMA-ring families at every batch: their batch tile
  case gemv_kind::wgmma:     // of 16 costs what batch 8 does, and at batch 8 they beat the batch
  case gemv_kind::wgmma_tma: // 1-4 rows of qkv, gate_up and lm_head); at least one k tile per
  case gemv_kind::wgmma_ws:  // stage of its ring in every slice; its blocks are few and fat, so
  case gemv_kind::wgmma_pk:  // a split is worth a look until the tiles fill the SMs twice over
  case gemv_kind::wgmma_sw:  // (the deep rings: at least 4 k tiles a slice)
    if ((batch < 8 && (c.kind == gemv_kind::gemm || c.kind == gemv_kind::wgmma)) ||
        slice_chunks < 8.0 * (c.kind == gemv_kind::wgmma_ws || c.kind == gemv_kind::wgmma_pk ||
                                      c.kind == gemv_kind::wgmma_sw
                                  ? 4
                                  : c.unroll))
      return false;
    return c.split_k == 1 ||
           (s.n + block_rows(c, s.n) - 1) / block_rows(c, s.n) * (c.split_k / 2) < 2LL * sm_count;
  }
  const long long tiles = (s.n + block_rows(c, s.n) - 1) / block_rows(c, s.n);
  const long long warps = tiles * c.warps_per_block;
  return c.split_k == 1 || warps * (c.split_k / 2) < 64LL * sm_count;
}

// The first pass: warps_per_block 8 (or every supported configuration with --full), each split-K
// simt and mma configuration with each cluster setting in `clusters`.
std::vector<gemv_config> first_pass(const shape_def& s, int batch, int sm_count, bool full,
                                    const std::vector<int>& clusters,
                                    const std::vector<std::string>& kinds) {
  std::vector<gemv_config> out;
  auto add = [&](const gemv_config& c) {
    for (const auto& o : out)
      if (same(o, c)) return;
    out.push_back(c);
  };
  add(pick_gemv_config(batch, s.n, s.k)); // the table's current choice, always timed
  const auto kind_wanted = [&](const gemv_config& c) { // --kinds
    return kinds.empty() ||
           std::find(kinds.begin(), kinds.end(), gemv_kind_name(c.kind)) != kinds.end();
  };
  if (s.few_configs) {
    for (const gemv_config c :
         {gemv_config{1, 8, 4, 1}, gemv_config{1, 8, 8, 1}, gemv_config{2, 8, 4, 1},
          gemv_config{4, 8, 2, 1}, gemv_config{2, 8, 4, 1, gemv_kind::bulk},
          gemv_config{16, 8, 2, 1, gemv_kind::mma}, gemv_config{16, 8, 4, 1, gemv_kind::mma},
          gemv_config{16, 8, 4, 1, gemv_kind::gemm}, gemv_config{16, 8, 3, 1, gemv_kind::gemm},
          gemv_config{32, 8, 4, 1, gemv_kind::gemm, 0, 2},
          gemv_config{64, 4, 4, 1, gemv_kind::wgmma}, gemv_config{128, 8, 4, 1, gemv_kind::wgmma},
          gemv_config{128, 8, 3, 1, gemv_kind::wgmma},
          gemv_config{64, 4, 4, 1, gemv_kind::wgmma_tma},
          gemv_config{128, 8, 4, 1, gemv_kind::wgmma_tma},
          gemv_config{128, 8, 3, 1, gemv_kind::wgmma_tma},
          gemv_config{64, 4, 4, 1, gemv_kind::wgmma_pk},
          gemv_config{64, 4, 6, 1, gemv_kind::wgmma_pk},
          // the swapped tile, narrow to wide (fewer x reads a weight byte at batch 64-128)
          gemv_config{48, 4, 6, 1, gemv_kind::wgmma_sw},
          gemv_config{80, 4, 4, 1, gemv_kind::wgmma_sw},
          gemv_config{96, 4, 4, 1, gemv_kind::wgmma_sw},
          gemv_config{128, 4, 4, 1, gemv_kind::wgmma_sw},
          gemv_config{128, 4, 6, 1, gemv_kind::wgmma_sw}})
      if (batch <= gemv_batch_group(c) && gemv_config_supported(c, batch, s.n, s.k) &&
          kind_wanted(c))
        add(c);
    return out;
  }
  auto consider = [&](gemv_config c) {
    if (!kind_wanted(c)) return;
    // mma: every warps_per_block in the first pass (its warps split K, so the count matters
    // more than elsewhere, and the family has only five (unroll, warps) pairs).
    if (!full && c.warps_per_block != 8 && c.kind != gemv_kind::mma &&
        c.kind != gemv_kind::packed && c.kind != gemv_kind::sweep && c.kind != gemv_kind::tsweep &&
        c.kind != gemv_kind::gemm && c.kind != gemv_kind::wgmma && c.kind != gemv_kind::wgmma_tma &&
        c.kind != gemv_kind::wgmma_ws && c.kind != gemv_kind::wgmma_pk &&
        c.kind != gemv_kind::wgmma_sw)
      return;
    for (int cl : clusters) {
      c.cluster = cl;
      if (!gemv_config_supported(c, batch, s.n, s.k)) continue;
      if (full || worth_timing(c, s, batch, sm_count)) add(c);
    }
  };
  for (int split : {1, 2, 4, 8})
    for (int wpb : {4, 8, 16})
      for (int unroll : {2, 4, 8}) {
        for (int rpw : {1, 2, 4}) {
          consider({rpw, wpb, unroll, split, gemv_kind::simt});
          consider({rpw, wpb, unroll, split, gemv_kind::bulk});
        }
        consider({16, wpb, unroll, split, gemv_kind::mma});
        consider({16, wpb, unroll, split, gemv_kind::packed});
      }
  // sweep: every (grid, rows in flight, warps per block); batch 1 and 2 only.
  for (int grid : {1, 2, 3, 4})
    for (int unroll : {1, 2, 4})
      for (int wpb : {8, 16})
        consider({grid, wpb, unroll, 1, gemv_kind::sweep});
  // tsweep: every (grid, split, tiles in flight, warps per block); batch up to 8.
  for (int grid : {1, 2, 3, 4})
    for (int split : {1, 2, 4, 8})
      for (int unroll : {1, 2})
        for (int wpb : {4, 8, 16})
          consider({grid, wpb, unroll, split, gemv_kind::tsweep});
  // gemm: every (rows a warp, warps, warps across the batch, stages, split); batch 16 up mainly.
  for (int split : {1, 2, 3, 4, 8})
    for (int rpw : {16, 32, 64})
      for (int wpb : {4, 8})
        for (int bw : {1, 2})
          for (int stages : {3, 4}) {
            gemv_config c{rpw, wpb, stages, split, gemv_kind::gemm};
            c.batch_warps = bw;
            consider(c);
          }
  // wgmma, wgmma_tma: every (rows a warpgroup, warpgroups, stages, split).
  for (gemv_kind kind : {gemv_kind::wgmma, gemv_kind::wgmma_tma})
    for (int split : {1, 2, 3, 4, 8})
      for (int rpg : {64, 128})
        for (int wpb : {4, 8})
          for (int stages : {3, 4})
            consider({rpg, wpb, stages, split, kind});
  // wgmma_ws: the same, with its deep rings.
  for (int split : {1, 2, 3, 4, 8})
    for (int rpg : {64, 128})
      for (int wpb : {4, 8})
        for (int stages : {6, 8, 12, 16})
          consider({rpg, wpb, stages, split, gemv_kind::wgmma_ws});
  // wgmma_pk: the same tiles and splits over the wgmma_tiles copy.
  for (int split : {1, 2, 3, 4, 8})
    for (int rpg : {64, 128})
      for (int wpb : {4, 8})
        for (int stages : {4, 6, 8})
          consider({rpg, wpb, stages, split, gemv_kind::wgmma_pk});
  // wgmma_sw: the swapped tile, 40 to 128 weight rows a block.
  for (int split : {1, 2, 3, 4, 8})
    for (int tn : {40, 48, 64, 80, 96, 128})
      for (int stages : {4, 6, 8})
        consider({tn, 4, stages, split, gemv_kind::wgmma_sw});
  return out;
}

struct measured {
  gemv_config c;
  std::string label; // a row that is not one of our configurations ("cublas")
  double median_us = 0, lo_us = 0, hi_us = 0, gbps = 0;
  bool ok = false;
};

// Workspace shared by every configuration: zero-filled once when (re)allocated, as the
// interface asks; the kernels leave it ready for the next configuration.
class workspace {
public:
  void* get(std::size_t bytes) {
    if (bytes > buf_.size()) {
      buf_ = device_buffer(bytes);
      KG_CUDA_CHECK(cudaMemset(buf_.get(), 0, bytes));
    }
    return buf_.get();
  }

private:
  device_buffer buf_;
};

float bf16_bits_to_float(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// One shape's inputs on the device (x for the largest batch; a batch uses its first rows), and
// the weights' copies in the packed layouts (where the shape has them).
struct shape_data {
  device_buffer x, w, w_packed, w_tiles, y, ref;
  std::vector<float> ref_host;
  shape_data(const shape_def& s, int max_batch)
      : x(static_cast<std::size_t>(max_batch) * s.k * 2),
        w(static_cast<std::size_t>(s.n) * s.k * 2),
        w_packed(gemv_packed_bytes(gemv_layout::packed, s.n, s.k)),
        w_tiles(gemv_packed_bytes(gemv_layout::wgmma_tiles, s.n, s.k)),
        y(static_cast<std::size_t>(max_batch) * s.n * 2),
        ref(static_cast<std::size_t>(max_batch) * s.n * sizeof(float)) {
    fill_bf16_hash(static_cast<__nv_bfloat16*>(x.get()), static_cast<std::size_t>(max_batch) * s.k,
                   7, 1.0f, nullptr);
    fill_bf16_hash(static_cast<__nv_bfloat16*>(w.get()), static_cast<std::size_t>(s.n) * s.k, 11,
                   1.0f, nullptr);
    for (auto [l, buf] :
         {std::pair{gemv_layout::packed, &w_packed}, std::pair{gemv_layout::wgmma_tiles, &w_tiles}})
      if (buf->size())
        KG_CUDA_CHECK(pack_gemv_weights(l, static_cast<const __nv_bfloat16*>(w.get()),
                                        static_cast<__nv_bfloat16*>(buf->get()), s.n, s.k,
                                        nullptr));
  }
  // The weights configuration `c` reads.
  const __nv_bfloat16* weights(const gemv_config& c) const {
    const gemv_layout l = gemv_weight_layout(c);
    const device_buffer& b = l == gemv_layout::packed        ? w_packed
                             : l == gemv_layout::wgmma_tiles ? w_tiles
                                                             : w;
    return static_cast<const __nv_bfloat16*>(b.get());
  }
  void compute_reference(const shape_def& s, int batch) {
    gemv_reference_f32(static_cast<const __nv_bfloat16*>(x.get()),
                       static_cast<const __nv_bfloat16*>(w.get()), static_cast<float*>(ref.get()),
                       batch, s.n, s.k, nullptr);
    ref_host.resize(static_cast<std::size_t>(batch) * s.n);
    KG_CUDA_CHECK(cudaMemcpy(ref_host.data(), ref.get(), ref_host.size() * sizeof(float),
                             cudaMemcpyDeviceToHost));
  }
};

// Runs `c` twice on poisoned outputs; "" when both match the reference and each other bitwise,
// else what went wrong.
// `launch` queues the product into d.y on the legacy stream and returns "" or why it failed.
template <class Launch>
std::string check_launch(shape_data& d, const shape_def& s, int batch, Launch launch) {
  const std::size_t count = static_cast<std::size_t>(batch) * s.n;
  std::vector<std::uint16_t> runs[2];
  for (auto& out : runs) {
    KG_CUDA_CHECK(cudaMemset(d.y.get(), 0xff, count * 2)); // NaN: an unwritten output shows
    if (const std::string e = launch(); !e.empty()) return e;
    KG_CUDA_CHECK(cudaDeviceSynchronize());
    out.resize(count);
    KG_CUDA_CHECK(cudaMemcpy(out.data(), d.y.get(), count * 2, cudaMemcpyDeviceToHost));
  }
  std::size_t wrong = 0, first = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const double got = bf16_bits_to_float(runs[0][i]), want = d.ref_host[i];
    if (!(std::fabs(got - want) <= 1e-2 * std::max(1.0, std::fabs(want))) && wrong++ == 0)
      first = i;
  }
  if (wrong) {
    std::ostringstream o;
    o << wrong << " of " << count << " outputs wrong, first [" << first / s.n << ", " << first % s.n
      << "]: " << bf16_bits_to_float(runs[0][first]) << " vs reference " << d.ref_host[first];
    return o.str();
  }
  if (runs[0] != runs[1]) return "not deterministic: two runs differ bitwise";
  return "";
}

std::string check_config(shape_data& d, const shape_def& s, int batch, const gemv_config& c,
                         void* ws) {
  return check_launch(d, s, batch, [&]() -> std::string {
    const cudaError_t e =
        launch_gemv_bf16(static_cast<const __nv_bfloat16*>(d.x.get()), d.weights(c),
                         static_cast<__nv_bfloat16*>(d.y.get()), batch, s.n, s.k, c, ws, nullptr);
    return e == cudaSuccess ? "" : std::string("launch failed: ") + cudaGetErrorString(e);
  });
}

// cuBLAS's product into d.y on `blas`'s stream.
std::string run_cublas(cublas_gemm& blas, shape_data& d, const shape_def& s, int batch) {
  try {
    blas.run(static_cast<const __nv_bfloat16*>(d.x.get()),
             static_cast<const __nv_bfloat16*>(d.w.get()), static_cast<__nv_bfloat16*>(d.y.get()),
             batch, s.n, s.k);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

void print_header() {
  std::cout << std::left << std::setw(9) << "shape" << std::right << std::setw(6) << "batch"
            << "  " << std::left << std::setw(22) << "config" << std::right << std::setw(10)
            << "median us" << std::setw(20) << "95% interval" << std::setw(9) << "GB/s"
            << std::setw(9) << "of copy"
            << "  check\n";
}

void print_row(const shape_def& s, int batch, const measured& m, const std::string& check,
               double copy) {
  std::cout << std::left << std::setw(9) << s.name << std::right << std::setw(6) << batch << "  "
            << std::left << std::setw(22) << (m.label.empty() ? config_name(m.c) : m.label)
            << std::right;
  if (!m.ok) {
    std::cout << "  FAIL: " << check << "\n";
    return;
  }
  std::ostringstream ci;
  ci << std::fixed << std::setprecision(2) << "[" << m.lo_us << ", " << m.hi_us << "]";
  std::cout << std::fixed << std::setprecision(2) << std::setw(10) << m.median_us << std::setw(20)
            << ci.str() << std::setprecision(1) << std::setw(9) << m.gbps << std::setw(8)
            << 100.0 * m.gbps / copy << "%  ok\n";
}

int usage() {
  std::cerr << "usage: kg_bench_gemv_sweep [--quick] [--full] [--list] [--max-wall S] "
               "[--shapes a,b] [--batches 1,8] [--cluster 0|1|both] [--kinds a,b] [--no-ceiling] "
               "[--no-cublas] [--check-only] [--backend NAME]\n";
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  std::cout << std::unitbuf; // rows as they are measured
  sweep_options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick")
      opt.quick = true;
    else if (a == "--full")
      opt.full = true;
    else if (a == "--list")
      opt.list = true;
    else if (a == "--no-ceiling")
      opt.no_ceiling = true;
    else if (a == "--no-cublas")
      opt.cublas = false;
    else if (a == "--check-only")
      opt.check_only = true;
    else if (a == "--backend" && i + 1 < argc) {
      const auto b = parse_timing_backend(argv[++i]);
      if (!b) return usage();
      opt.backend = *b;
    } else if (a == "--kinds" && i + 1 < argc)
      opt.kinds = split_list(argv[++i]);
    else if (a == "--max-wall" && i + 1 < argc)
      opt.max_wall = std::atof(argv[++i]);
    else if (a == "--shapes" && i + 1 < argc)
      opt.shapes = split_list(argv[++i]);
    else if (a == "--batches" && i + 1 < argc) {
      for (const auto& b : split_list(argv[++i])) {
        const int v = std::atoi(b.c_str());
        if (v < 1 || v > 128) return usage();
        opt.batches.push_back(v);
      }
    } else if (a == "--cluster" && i + 1 < argc) {
      const std::string v = argv[++i];
      if (v == "0" || v == "1")
        opt.clusters = {std::stoi(v)};
      else if (v == "both")
        opt.clusters = {0, 1};
      else
        return usage();
    } else
      return usage();
  }
  std::vector<shape_def> shapes = {{"down", 2560, 9728},
                                   {"qkv", 6144, 2560},
                                   {"o_proj", 2560, 4096},
                                   {"gate_up", 19456, 2560},
                                   {"lm_head", 151936, 2560, true}};
  std::vector<int> batches = {1, 2, 4, 8, 16, 32};
  if (opt.quick) {
    shapes.resize(1);
    batches = {1, 8};
  }
  if (!opt.shapes.empty()) {
    std::vector<shape_def> kept;
    for (const auto& name : opt.shapes) {
      const auto it = std::find_if(shapes.begin(), shapes.end(),
                                   [&](const shape_def& s) { return s.name == name; });
      if (it == shapes.end()) {
        std::cerr << "kg_bench_gemv_sweep: unknown shape '" << name << "'\n";
        return 2;
      }
      kept.push_back(*it);
    }
    shapes = kept;
  }
  if (!opt.batches.empty()) batches = opt.batches;
  const int max_batch = *std::max_element(batches.begin(), batches.end());

  if (opt.list) { // the first pass as it would run on an H200 (132 SMs), plus 2 x 3 re-timings
    std::size_t total = 0;
    for (const auto& s : shapes)
      for (int b : batches) {
        const auto cs = first_pass(s, b, 132, opt.full, opt.clusters, opt.kinds);
        const std::size_t second = opt.full || s.few_configs ? 0 : 6;
        total += cs.size() + second;
        std::cout << s.name << " b" << b << ": " << cs.size() << " + " << second << ":";
        for (const auto& c : cs)
          std::cout << " [" << config_name(c) << "]";
        std::cout << "\n";
      }
    std::cout << total << " configurations, about " << std::fixed << std::setprecision(0)
              << total * (opt.max_wall + 0.03) << " s of timing\n";
    return 0;
  }

  const auto dev = query_device(0);
  if (!dev.available) {
    std::cerr << "kg_bench_gemv_sweep: no GPU: " << dev.reason << "\n";
    return 3;
  }
  copy_bandwidth copy_1g{};
  if (!opt.check_only) copy_1g = measure_copy_bandwidth(std::size_t{1} << 30);
  const double copy = copy_1g.gbps, copy_us = copy_1g.median_us;
  timing_options o;
  o.max_wall_seconds = opt.max_wall;
  o.backend = opt.backend;
  gpu_timer timer(o);
  std::unique_ptr<cublas_gemm> blas;
  if (opt.cublas) blas = std::make_unique<cublas_gemm>(timer.stream());
  std::cout << std::fixed << std::setprecision(1) << "device: " << dev.name << " (" << dev.sm_count
            << " SMs), timing backend " << timing_backend_name(o.backend) << ", max wall "
            << opt.max_wall << " s per configuration\n";
  if (opt.check_only)
    std::cout << "check only: every output checked, nothing timed\n";
  else
    std::cout << "copy bandwidth (read + write), device to device, 1 GiB: " << copy << " GB/s ("
              << copy_us << " us); fractions below are of it\n";
  std::cout << (blas ? "cuBLAS " + cublas_version() + " beside every (shape, batch)\n" : "")
            << "\n";
  print_header();

  workspace ws;
  int failures = 0;
  std::vector<std::pair<std::pair<const shape_def*, int>, measured>> best;
  // The highest bandwidth per (shape, batch) and family, GB/s: how the families compare.
  std::map<std::pair<std::pair<const shape_def*, int>, int>, double> family_best;
  // The same per split-K finish: 0 none (split_k 1), 1 workspace, 2 cluster.
  std::map<std::pair<std::pair<const shape_def*, int>, int>, double> finish_best;
  std::map<std::pair<const shape_def*, int>, measured> against_cublas; // cuBLAS per (shape, batch)
  device_buffer sink(4096 * sizeof(unsigned));
  for (const auto& s : shapes) {
    shape_data d(s, max_batch);
    // The weight's read ceiling: one contiguous read of it (bench/gemv_reference.h), as a
    // fraction of the same copy bandwidth -- what no GEMV of this weight can beat.
    if (!opt.no_ceiling && !opt.check_only)
      for (const int blocks : {528, 1056, 2112})
        for (const int unroll : {4, 8, 16}) {
          const std::size_t bytes = static_cast<std::size_t>(s.n) * s.k * 2;
          const auto t = timer.measure([&](cudaStream_t st) {
            read_stream(d.w.get(), bytes, static_cast<unsigned*>(sink.get()), blocks, unroll, st);
          });
          const double gbps = bytes / (t.summary.median * 1e-6) / 1e9;
          std::cout << std::left << std::setw(9) << s.name << std::right << std::setw(6) << "-"
                    << "  " << std::left << std::setw(22)
                    << ("read " + std::to_string(blocks) + "x256 u" + std::to_string(unroll))
                    << std::right << std::fixed << std::setprecision(2) << std::setw(10)
                    << t.summary.median << std::setw(20) << "" << std::setprecision(1)
                    << std::setw(9) << gbps << std::setw(8) << 100.0 * gbps / copy
                    << "%  read ceiling\n";
        }
    for (int batch : batches) {
      d.compute_reference(s, batch);
      const double min_bytes =
          2.0 * (static_cast<double>(s.n) * s.k + static_cast<double>(batch) * (s.k + s.n));
      std::vector<measured> done;
      // Times `work` into m once `check` (the output check's finding) is empty; prints the row.
      auto time_row = [&](measured& m, std::string check, const work_fn& work) {
        if (opt.check_only) {
          if (!check.empty()) ++failures;
          std::cout << std::left << std::setw(9) << s.name << std::right << std::setw(6) << batch
                    << "  " << std::left << std::setw(22)
                    << (m.label.empty() ? config_name(m.c) : m.label) << std::right << "  "
                    << (check.empty() ? "checked" : "FAIL: " + check) << "\n";
          return;
        }
        if (check.empty()) {
          try {
            const auto t = timer.measure(work);
            m.median_us = t.summary.median;
            m.lo_us = t.median_ci.lo;
            m.hi_us = t.median_ci.hi;
            m.gbps = min_bytes / (m.median_us * 1e-6) / 1e9;
            m.ok = true;
          } catch (const std::exception& e) {
            check = std::string("timing failed: ") + e.what();
          }
        }
        if (!m.ok) ++failures;
        print_row(s, batch, m, check, copy);
      };
      auto run_one = [&](const gemv_config& c) {
        measured m;
        m.c = c;
        void* w = ws.get(gemv_workspace_bytes(c, batch, s.n, s.k));
        time_row(m, check_config(d, s, batch, c, w), [&](cudaStream_t st) {
          KG_CUDA_CHECK(launch_gemv_bf16(static_cast<const __nv_bfloat16*>(d.x.get()), d.weights(c),
                                         static_cast<__nv_bfloat16*>(d.y.get()), batch, s.n, s.k, c,
                                         w, st));
        });
        done.push_back(m);
      };
      for (const auto& c : first_pass(s, batch, dev.sm_count, opt.full, opt.clusters, opt.kinds))
        run_one(c);
      if (!opt.full && !s.few_configs) { // the three best with 4 and 16 warps per block
        std::vector<measured> top;
        for (const auto& m : done)
          if (m.ok) top.push_back(m);
        std::sort(top.begin(), top.end(),
                  [](const measured& a, const measured& b) { return a.median_us < b.median_us; });
        top.resize(std::min<std::size_t>(top.size(), 3));
        for (const auto& m : top)
          for (int wpb : {4, 16}) {
            gemv_config c = m.c;
            c.warps_per_block = wpb;
            if (!gemv_config_supported(c, batch, s.n, s.k)) continue; // bulk: no 16
            bool seen = false;
            for (const auto& e : done)
              seen = seen || same(e.c, c);
            if (!seen) run_one(c);
          }
      }
      const measured* b = nullptr;
      for (const auto& m : done)
        if (m.ok && (!b || m.median_us < b->median_us)) b = &m;
      if (b) best.push_back({{&s, batch}, *b});
      if (blas) { // cuBLAS, checked and timed as ours are
        measured m;
        m.label = "cublas";
        time_row(m, check_launch(d, s, batch, [&] { return run_cublas(*blas, d, s, batch); }),
                 [&](cudaStream_t) { // (the handle is bound to the timer's stream)
                   if (const auto e = run_cublas(*blas, d, s, batch); !e.empty())
                     throw std::runtime_error(e);
                 });
        if (m.ok) against_cublas[{&s, batch}] = m;
      }
      for (const auto& m : done)
        if (m.ok) {
          double& f = family_best[{{&s, batch}, static_cast<int>(m.c.kind)}];
          f = std::max(f, m.gbps);
          double& p = finish_best[{{&s, batch}, m.c.split_k == 1 ? 0 : 1 + m.c.cluster}];
          p = std::max(p, m.gbps);
        }
    }
  }

  if (opt.check_only) {
    if (failures)
      std::cout << "FAIL: " << failures << " configuration(s) wrong or not deterministic\n";
    return failures ? 1 : 0;
  }
  std::cout << "\nbest configuration per (shape, batch), as rows of pick_gemv_config's table\n"
               "({n, k, max_batch, {rows_per_warp, warps_per_block, unroll, split_k[, kind[, "
               "cluster]]}};\n"
               "the comment: its time, its fraction of the copy bandwidth, and the best of each\n"
               "family and by split-K finish -- s1 no split, ws workspace, cl cluster -- as a\n"
               "fraction of copy):\n";
  for (const auto& [key, m] : best) {
    const auto& [s, batch] = key;
    std::ostringstream families;
    for (const gemv_kind k :
         {gemv_kind::simt, gemv_kind::bulk, gemv_kind::mma, gemv_kind::sweep, gemv_kind::tsweep,
          gemv_kind::packed, gemv_kind::gemm, gemv_kind::wgmma, gemv_kind::wgmma_tma,
          gemv_kind::wgmma_ws, gemv_kind::wgmma_pk, gemv_kind::wgmma_sw}) {
      const auto it = family_best.find({{s, batch}, static_cast<int>(k)});
      families << " " << gemv_kind_name(k) << " ";
      if (it == family_best.end())
        families << "-";
      else
        families << std::fixed << std::setprecision(1) << 100.0 * it->second / copy << "%";
    }
    for (const int f : {0, 1, 2}) {
      const auto it = finish_best.find({{s, batch}, f});
      if (it != finish_best.end())
        families << " "
                 << (f == 0   ? "s1"
                     : f == 1 ? "ws"
                              : "cl")
                 << " " << std::fixed << std::setprecision(1) << 100.0 * it->second / copy << "%";
    }
    std::cout << "    {" << s->n << ", " << s->k << ", " << batch << ", " << table_config(m.c)
              << "}, // " << s->name << " b" << batch << ": " << std::fixed << std::setprecision(2)
              << m.median_us << " us, " << std::setprecision(1) << 100.0 * m.gbps / copy
              << "% of copy;" << families.str() << "\n";
  }
  if (!against_cublas.empty()) {
    std::cout << "\nours against cuBLAS, same process and timer (ratio: cuBLAS time / ours; "
                 "above 1 ours is faster)\n"
              << std::left << std::setw(9) << "shape" << std::right << std::setw(6) << "batch"
              << std::setw(12) << "ours us" << std::setw(9) << "of copy" << std::setw(12)
              << "cuBLAS us" << std::setw(9) << "of copy" << std::setw(8) << "ratio"
              << "  ours\n";
    for (const auto& [key, m] : best) {
      const auto it = against_cublas.find(key);
      if (it == against_cublas.end()) continue;
      const auto& c = it->second;
      // Ahead only where both medians' intervals do not overlap; else a tie.
      const char* verdict = m.hi_us < c.lo_us ? "ahead" : c.hi_us < m.lo_us ? "behind" : "tie";
      std::cout << std::left << std::setw(9) << key.first->name << std::right << std::setw(6)
                << key.second << std::fixed << std::setprecision(2) << std::setw(12) << m.median_us
                << std::setprecision(1) << std::setw(8) << 100.0 * m.gbps / copy << "%"
                << std::setprecision(2) << std::setw(12) << c.median_us << std::setprecision(1)
                << std::setw(8) << 100.0 * c.gbps / copy << "%" << std::setprecision(3)
                << std::setw(8) << c.median_us / m.median_us << "  " << verdict << "\n";
    }
  }
  std::cout << "\ntargets: down b1 >= 85% of copy, down b8 >= 80%\n";
  if (failures) {
    std::cout << "FAIL: " << failures << " configuration(s) wrong or not deterministic\n";
    return 1;
  }
  return 0;
}
