// The bulk family of the decode GEMV (kernels/decode/gemv_bf16.h): Hopper bulk async copies
// stream the weights into a shared-memory ring, and the warps compute from there.
//
// A block owns a tile of R = RPW x WPB consecutive rows and one K slice (block index = tile *
// split + slice, as the simt family). The slice is cut into stages of 64 chunks (1 KB) per row;
// stage i goes to ring slot i % STAGES. Warp 0 issues a stage as one cp.async.bulk per row (lane
// r copies row r), all completing on the slot's mbarrier, whose transaction count lane 0 arms
// with the stage's bytes. So a block keeps STAGES x R KB of weights in flight with no registers
// holding them and no per-lane address arithmetic -- what the simt family cannot do without
// spilling. Every warp then reads its RPW rows' chunks of the stage from shared memory (lane j
// takes chunks j and j + 32: conflict-free 16-byte reads) and does the simt family's FMAs
// (fma_chunk, x from L1). After the whole block is done with a slot (__syncthreads), warp 0
// refills it with the stage STAGES ahead.
//
// Sums run in ascending k per lane, the warp reduction and the split-K finish are the simt
// family's: the bits never depend on scheduling or on which SMs run the blocks.

#include "kernels/decode/gemv_bf16_kernel.cuh"
#include "kernels/decode/mbarrier.cuh"

namespace kg::gemv_detail {
namespace {

using kg::decode::bulk_copy;
using kg::decode::mbar_arrive_expect_tx;
using kg::decode::mbar_init;
using kg::decode::mbar_init_fence;
using kg::decode::mbar_wait;

template <int BG, int RPW, int WPB, int STAGES>
__global__ void __launch_bounds__(WPB * 32) gemv_bulk_kernel(const gemv_args a) {
  constexpr int R = RPW * WPB;
  constexpr int C = bulk_stage_chunks;
  extern __shared__ uint4 ring[]; // [STAGES][R][C]
  __shared__ alignas(8) unsigned long long full[STAGES];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int tile = static_cast<int>(blockIdx.x) / a.split;
  const int slice = static_cast<int>(blockIdx.x) % a.split;
  const int tile_row0 = tile * R, row0 = tile_row0 + warp * RPW;
  const int valid_rows = min(R, a.n - tile_row0); // >= 1: tiles cover n exactly
  const int begin = slice * a.slice_len, end = min(a.k8, begin + a.slice_len);
  const int stages = end > begin ? (end - begin + C - 1) / C : 0;
  const uint4* x = reinterpret_cast<const uint4*>(a.x);
  const uint4* w = reinterpret_cast<const uint4*>(a.w);

  if (threadIdx.x == 0) {
#pragma unroll
    for (int p = 0; p < STAGES; ++p)
      mbar_init(&full[p], 1);
    mbar_init_fence();
  }
  gemv_prologue();
  __syncthreads();

  // Warp 0 only. Rows past n are not copied (their slot rows hold stale bytes, whose sums are
  // never stored) and are not counted in the expected bytes.
  auto issue = [&](int i) {
    const int slot = i % STAGES, c0 = begin + i * C;
    const int len = min(C, end - c0);
    if (lane == 0) mbar_arrive_expect_tx(&full[slot], static_cast<unsigned>(valid_rows * len * 16));
    __syncwarp(); // armed before the first byte can land
    for (int r = lane; r < valid_rows; r += 32)
      bulk_copy(ring + (static_cast<std::size_t>(slot) * R + r) * C,
                w + static_cast<std::size_t>(tile_row0 + r) * a.k8 + c0,
                static_cast<unsigned>(len * 16), &full[slot]);
  };
  if (warp == 0)
    for (int i = 0; i < min(STAGES, stages); ++i)
      issue(i);

  float acc[RPW][BG];
#pragma unroll
  for (int r = 0; r < RPW; ++r)
#pragma unroll
    for (int b = 0; b < BG; ++b)
      acc[r][b] = 0.0f;

  for (int i = 0; i < stages; ++i) {
    const int slot = i % STAGES, c0 = begin + i * C;
    const int len = min(C, end - c0);
    mbar_wait(&full[slot], static_cast<unsigned>((i / STAGES) & 1)); // its (i / STAGES)-th fill
    const uint4* stage = ring + (static_cast<std::size_t>(slot) * R + warp * RPW) * C;
#pragma unroll
    for (int h = 0; h < C / 32; ++h) {
      const int j = lane + 32 * h;
      if (j >= len) break; // a slice's last, short stage
      uint4 wv[RPW];
#pragma unroll
      for (int r = 0; r < RPW; ++r)
        wv[r] = stage[r * C + j];
      fma_chunk<BG, RPW>(wv, x, a.k8, c0 + j, a.nb, acc);
    }
    __syncthreads(); // every warp is done reading the slot
    if (warp == 0 && i + STAGES < stages) issue(i + STAGES);
  }

  store_warp_rows<BG, RPW>(a, acc, row0, lane, slice);
  if (a.split > 1) finish_split_k(a, tile, R);
}

template <int BG, int RPW, int WPB, int STAGES>
cudaError_t launch_bulk_one(const gemv_args& a, int blocks, cudaStream_t s) {
  constexpr int bytes = bulk_ring_bytes(RPW * WPB, STAGES);
  if constexpr (bytes > bulk_max_ring_bytes) {
    return cudaErrorInvalidValue;
  } else {
    auto kernel = gemv_bulk_kernel<BG, RPW, WPB, STAGES>;
    const cudaError_t e = allow_dynamic_smem(reinterpret_cast<const void*>(kernel), bytes);
    if (e != cudaSuccess) return e;
    return pdl::launch(kernel, dim3(blocks), dim3(WPB * 32), bytes, s, a.programmatic, 1u, a);
  }
}

template <int BG, int RPW, int WPB>
cudaError_t launch_bulk_stages(const gemv_args& a, int stages, int blocks, cudaStream_t s) {
  switch (stages) {
  case 2:
    return launch_bulk_one<BG, RPW, WPB, 2>(a, blocks, s);
  case 4:
    return launch_bulk_one<BG, RPW, WPB, 4>(a, blocks, s);
  case 8:
    return launch_bulk_one<BG, RPW, WPB, 8>(a, blocks, s);
  default:
    return cudaErrorInvalidValue;
  }
}

template <int BG, int RPW>
cudaError_t launch_bulk_wpb(const gemv_args& a, int stages, int wpb, int blocks, cudaStream_t s) {
  switch (wpb) {
  case 4:
    return launch_bulk_stages<BG, RPW, 4>(a, stages, blocks, s);
  case 8:
    return launch_bulk_stages<BG, RPW, 8>(a, stages, blocks, s);
  default:
    return cudaErrorInvalidValue;
  }
}

// Batch groups up to 8 (RPW x BG <= 32 accumulators): larger batches belong to the mma family.
template <int RPW>
cudaError_t launch_bulk_rows(const gemv_args& a, int bg, int stages, int wpb, int blocks,
                             cudaStream_t s) {
  switch (bg) {
  case 1:
    return launch_bulk_wpb<1, RPW>(a, stages, wpb, blocks, s);
  case 2:
    return launch_bulk_wpb<2, RPW>(a, stages, wpb, blocks, s);
  case 4:
    return launch_bulk_wpb<4, RPW>(a, stages, wpb, blocks, s);
  case 8:
    return launch_bulk_wpb<8, RPW>(a, stages, wpb, blocks, s);
  default:
    return cudaErrorInvalidValue;
  }
}

} // namespace

cudaError_t launch_gemv_bulk(const gemv_args& a, int bg, int rows_per_warp, int stages,
                             int warps_per_block, int blocks, cudaStream_t s) {
  switch (rows_per_warp) {
  case 1:
    return launch_bulk_rows<1>(a, bg, stages, warps_per_block, blocks, s);
  case 2:
    return launch_bulk_rows<2>(a, bg, stages, warps_per_block, blocks, s);
  case 4:
    return launch_bulk_rows<4>(a, bg, stages, warps_per_block, blocks, s);
  default:
    return cudaErrorInvalidValue;
  }
}

} // namespace kg::gemv_detail
