// The wgmma_sw family of the decode GEMV (kernels/decode/gemv_bf16.h): the wgmma_ws block with
// the operands swapped. The batch is the warpgroup MMA's M (64 rows a wgmma, one or two of them)
// and the weight rows its N, so a block's tile is any multiple of 8 rows instead of 64.
//
// Why: N may be any multiple of 8 where M is 64, so the tile can be cut to fill the GPU in one
// wave. qkv's 6144 rows are 96 tiles of 64 (36 of 132 SMs idle, and a split of 2 cost more than
// it gave) but 128 tiles of 48; o_proj's and down's 2560 rows are 64 tiles of 40, 128 blocks at
// split 2. cuBLAS's kernels for these shapes take row tiles that are no multiple of 64 either
// (gate_up 168, docs/performance.md, What cuBLAS runs). 64-row tiles are the wgmma_ws tile with
// the batch on M (gate_up's 19456 rows: 304 blocks, several a wave). The price: below batch 64 the
// M rows past the batch are zeros the tensor cores multiply (the TMA fills them; no bytes are read
// for them).
//
// Every block reads the whole x tile of its K slice from L2, once per block: at batch 128 a
// 48-row tile reads 128 / 48 = 2.7 bytes of x for each byte of weights, so L2 carries several
// times the weights' bytes. Wider tiles (80, 96, 128 rows) with a deeper split keep the grid at
// about one wave and cut that ratio (qkv: 64 tiles of 96 at split 2, 1.3 bytes; o_proj and down:
// 32 tiles of 80 at split 4, 1.6 bytes), at the price of more accumulators a thread (up to 128)
// and a shallower ring where two m64 batch tiles fill the stage.
//
// The block: one consumer warpgroup and one producer warpgroup (256 threads), a ring of STAGES
// stages, each the x tile (64 MB rows x one 64-column k tile) then the weights' TN rows of it,
// both 128-byte swizzled by the TMA. The producer refills a stage once the 4 consumer warps have
// released it (the wgmma_ws protocol, gemv_bf16_wgmma_ws.cuh). Sums: every output's k tiles in
// order, each tile's four k16 steps in order; split K adds the slices in slice order (the
// workspace or the cluster finish, both the wgmma_ws family's), so the bits depend on the
// configuration alone, never on the SMs.
#include "kernels/decode/gemv_bf16_wgmma_ws.cuh"

namespace kg::gemv_detail {
namespace {

// A stage: the x tile (64 MB rows), then the weights' TN rows, 128 bytes (one k tile) each.
__host__ __device__ constexpr int sw_x_bytes(int mb) {
  return mb * 64 * row_bytes;
}
__host__ __device__ constexpr int sw_stage_bytes(int tn, int mb) {
  return sw_x_bytes(mb) + tn * row_bytes;
}

// The accumulators (M = batch, N = weight rows; gemv_bf16_wgmma.cuh has the layout) -> y, or ->
// slice `slice`'s fp32 partials; batch rows past nb and weight rows past n dropped.
template <int TN, int MB>
__device__ __forceinline__ void store_sw_tile(const float (&c)[MB][TN / 2], const gemv_args& a,
                                              int row0, int t, int slice) {
#pragma unroll
  for (int mb = 0; mb < MB; ++mb)
#pragma unroll
    for (int e = 0; e < TN / 2; ++e) {
      const wgmma_position p = wgmma_accumulator_at(t, e);
      const int b = mb * 64 + p.m, row = row0 + p.n;
      if (row >= a.n || b >= a.nb) continue;
      if (a.split == 1)
        store_y(a, static_cast<std::size_t>(b) * a.n + row, c[mb][e]);
      else
        a.partial[slice * a.slice_stride + static_cast<long long>(b) * a.n + row] = c[mb][e];
    }
}

// ... into the ring as the cluster finish's partials (batch b, tile row r at b (TN + 4) + r),
// once every consumer warp is done with the ring.
template <int TN, int MB>
__device__ __forceinline__ void stage_sw_part(const float (&c)[MB][TN / 2], unsigned char* ring,
                                              int t) {
  asm volatile("bar.sync 1, 128;" ::: "memory"); // the consumers only
  float* part = reinterpret_cast<float*>(ring);
#pragma unroll
  for (int mb = 0; mb < MB; ++mb)
#pragma unroll
    for (int e = 0; e < TN / 2; ++e) {
      const wgmma_position p = wgmma_accumulator_at(t, e);
      part[(mb * 64 + p.m) * cluster_part_stride<TN> + p.n] = c[mb][e];
    }
}

template <int TN, int MB, int STAGES>
__global__ void __launch_bounds__(256, 1)
    gemv_wgmma_sw_kernel(const __grid_constant__ CUtensorMap w_map,
                         const __grid_constant__ CUtensorMap x_map, const gemv_args a) {
  constexpr int x_bytes = sw_x_bytes(MB), stage_size = sw_stage_bytes(TN, MB);
  constexpr int producer = 128;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __shared__ alignas(8) unsigned long long full[STAGES];
  __shared__ alignas(8) unsigned long long empty[STAGES];
  unsigned base;
  unsigned char* smem = align_ring(smem_raw, base);
  const int tid = static_cast<int>(threadIdx.x), t = tid % 128;
  const ring_slice r = block_slice<TN>(a);

  if (tid == producer) {
    for (int j = 0; j < STAGES; ++j) {
      kg::decode::mbar_init(&full[j], 1);
      kg::decode::mbar_init(&empty[j], 4); // one arrival per consumer warp
    }
    kg::decode::mbar_init_fence();
    // The weights never depend on the kernel ahead: their first tiles head for L2 before the
    // programmatic wait.
    for (int j = 0; j < STAGES && j < r.count; ++j)
      kg::decode::tma_prefetch_2d(&w_map, (r.kt0 + j) * tma_tile_elements, r.row0);
  }
  __syncthreads();
  gemv_prologue();

  if (tid >= producer) {
    if (tid == producer)
      for (int j = 0; j < r.count; ++j) {
        const int s = j % STAGES;
        if (j >= STAGES)
          kg::decode::mbar_wait(&empty[s], static_cast<unsigned>(j / STAGES - 1) & 1u);
        kg::decode::mbar_arrive_expect_tx(&full[s], stage_size);
        unsigned char* st = smem + s * stage_size;
        const int col = (r.kt0 + j) * tma_tile_elements;
        kg::decode::tma_load_2d(st, &x_map, col, 0, &full[s]);
        kg::decode::tma_load_2d(st + x_bytes, &w_map, col, r.row0, &full[s]);
      }
  } else {
    float c[MB][TN / 2];
    zero_accumulators(c);
    for (int i = 0; i < r.count; ++i) {
      const int s = i % STAGES;
      kg::decode::mbar_wait(&full[s], static_cast<unsigned>(i / STAGES) & 1u);
      const unsigned st = base + static_cast<unsigned>(s * stage_size);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < gemm_tile_chunks / 2; ++ks) {
        const std::uint64_t w = smem_desc(st + x_bytes + ks * 32);
#pragma unroll
        for (int mb = 0; mb < MB; ++mb)
          wgmma_bf16<TN>(c[mb], smem_desc(st + mb * 64 * row_bytes + ks * 32), w);
      }
      wgmma_commit();
      wgmma_wait_all();
      if (t % 32 == 0) kg::decode::mbar_arrive(&empty[s]);
    }
    pin_accumulators(c);
    if (a.cluster)
      stage_sw_part<TN, MB>(c, smem, t);
    else
      store_sw_tile<TN, MB>(c, a, r.row0, t, r.slice);
  }
  // (every thread: both finishes meet at barriers)
  if (a.cluster)
    finish_wgmma_cluster<TN>(a, smem, r);
  else if (a.split > 1)
    finish_split_k(a, r.tile, TN);
}

// Whether a ring of STAGES stages fits a block (the wide tiles at two m64 batch tiles take 4 or
// 6 stages, not 8: gemv_config_supported's rule) and holds the cluster finish's partials.
template <int TN, int MB, int STAGES>
constexpr bool sw_ring_fits() {
  constexpr int ring = STAGES * sw_stage_bytes(TN, MB);
  return ring + smem_align <= wgmma_ws_max_smem_bytes && cluster_part_bytes<TN, MB * 64> <= ring;
}

template <int TN, int MB, int STAGES>
cudaError_t launch_sw(const gemv_args& a, int blocks, cudaStream_t s) {
  if constexpr (!sw_ring_fits<TN, MB, STAGES>()) {
    return cudaErrorInvalidValue;
  } else {
    constexpr int smem_bytes = STAGES * sw_stage_bytes(TN, MB) + smem_align;
    const auto kernel = gemv_wgmma_sw_kernel<TN, MB, STAGES>;
    CUtensorMap w_map, x_map;
    cudaError_t e =
        kg::decode::encode_bf16_tile_map(w_map, a.w, a.n, a.k8 * 8, TN, tma_tile_elements);
    if (e == cudaSuccess)
      e = kg::decode::encode_bf16_tile_map(x_map, a.x, a.nb, a.k8 * 8, MB * 64, tma_tile_elements);
    if (e != cudaSuccess) return e;
    e = allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem_bytes);
    if (e != cudaSuccess) return e;
    return pdl::launch(kernel, dim3(blocks), dim3(256), smem_bytes, s, a.programmatic,
                       a.cluster ? static_cast<unsigned>(a.split) : 1u, w_map, x_map, a);
  }
}

template <int TN, int MB>
cudaError_t launch_sw_stages(const gemv_args& a, int stages, int blocks, cudaStream_t s) {
  switch (stages) {
  case 4:
    return launch_sw<TN, MB, 4>(a, blocks, s);
  case 6:
    return launch_sw<TN, MB, 6>(a, blocks, s);
  case 8:
    return launch_sw<TN, MB, 8>(a, blocks, s);
  default:
    return cudaErrorInvalidValue;
  }
}

template <int TN>
cudaError_t launch_sw_batch(const gemv_args& a, int bn, int stages, int blocks, cudaStream_t s) {
  return bn <= 64 ? launch_sw_stages<TN, 1>(a, stages, blocks, s)
                  : launch_sw_stages<TN, 2>(a, stages, blocks, s);
}

} // namespace

cudaError_t launch_gemv_wgmma_sw(const gemv_args& a, int bn, int tile_rows, int stages, int blocks,
                                 cudaStream_t s) {
  if (bn > gemm_max_batch) return cudaErrorInvalidValue;
  switch (tile_rows) {
  case 40:
    return launch_sw_batch<40>(a, bn, stages, blocks, s);
  case 48:
    return launch_sw_batch<48>(a, bn, stages, blocks, s);
  case 64:
    return launch_sw_batch<64>(a, bn, stages, blocks, s);
  case 80:
    return launch_sw_batch<80>(a, bn, stages, blocks, s);
  case 96:
    return launch_sw_batch<96>(a, bn, stages, blocks, s);
  case 128:
    return launch_sw_batch<128>(a, bn, stages, blocks, s);
  default:
    return cudaErrorInvalidValue;
  }
}

} // namespace kg::gemv_detail
