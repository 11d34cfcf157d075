// The mma family of the decode GEMV (kernels/decode/gemv_bf16.h): tensor cores do the arithmetic,
// so from batch 2 up the kernel stays a pure weight stream (the simt family's FMAs and x loads
// grow with the batch and make batch 8 compute- and L1-bound).
//
// A block owns 16 rows (the m16 tile) and one K slice (block index = tile * split + slice). Its
// WPB warps share the slice: it is cut into super-steps of UNROLL x 64 elements, and warp w takes
// super-steps w, w + WPB, ... (the block as a whole walks the rows front to back). Lane (g, t)
// (g = lane / 4, t = lane % 4) loads, per 64-element step, the 32 contiguous bytes at elements
// 16t .. 16t + 16 of rows g and g + 8 -- four lanes cover a row's 128-byte line -- and x's batch
// row g of each 8-column batch tile at the same elements. A dot product's k order is free, so
// each 16-byte chunk feeds one m16n8k16 mma as if its four words were the fragment's k pairs
// {2t, 2t + 8} (words 0, 1) and, in a second mma, words 2, 3: A and B take the same physical k
// for each logical k because both depend on t alone. A super-step's weights are loaded one
// super-step ahead of its mma's (software pipeline: up to 2 x UNROLL x 64 bytes per
// lane in flight); x is read through L1.
//
// The warps' 16 x 8NT float tiles are summed in warp order through shared memory, and split K
// ends with the simt family's fixed-order slice sum: the same bits whichever SMs run the blocks.
#include "kernels/decode/gemv_bf16_kernel.cuh"

namespace kg::gemv_detail {
namespace {

constexpr int mma_rows = 16;
constexpr int step_chunks = 8; // 16-byte chunks of a row per 64-element step (two per lane)

// The weights of one super-step of UNROLL 64-element steps from chunk `base`: per step, the 32
// bytes of rows g and g + 8 at chunks 2t, 2t + 1. WHOLE: every chunk is inside the slice (no
// predicate); otherwise (the slice's last, partial super-step) chunks at or past `end` are zero.
template <int UNROLL, bool WHOLE>
__device__ __forceinline__ void load_super_step(uint4 (&r)[UNROLL][2][2], const uint4* wa,
                                                const uint4* wb, int base, int end, int t) {
  const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int u = 0; u < UNROLL; ++u)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int ch = base + u * step_chunks + 2 * t + h;
      const bool in = WHOLE || ch < end; // k % 8 == 0: a chunk is wholly in the slice or out
      r[u][0][h] = in ? load_stream(wa + ch) : zero;
      r[u][1][h] = in ? load_stream(wb + ch) : zero;
    }
}

// The super-step's mma's: x's chunks (L1) at the same places, chunks past `end` zero.
template <int NT, int UNROLL, bool WHOLE>
__device__ __forceinline__ void mma_super_step(const uint4 (&r)[UNROLL][2][2],
                                               const uint4* const (&xr)[NT], int base, int end,
                                               int t, float (&c)[NT][4]) {
#pragma unroll
  for (int u = 0; u < UNROLL; ++u)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int ch = base + u * step_chunks + 2 * t + h;
      const bool in = WHOLE || ch < end;
      mma_chunk_pair<NT>(c, r[u][0][h], r[u][1][h], xr, ch, in);
    }
}

// Registers decide the waves here: the down projection's 640 blocks of 4 warps (u2, batch tile
// 1) fit one wave of 5 per SM at ptxas's 96 registers. A variant with a cluster finish took 102,
// ran a sixth of the blocks as a second wave and was slower (docs/architecture.md has the
// times), so this family has no cluster finish.
template <int NT, int UNROLL, int WPB>
__global__ void __launch_bounds__(WPB * 32) gemv_mma_kernel(const gemv_args a) {
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const int tile = static_cast<int>(blockIdx.x) / a.split;
  const int slice = static_cast<int>(blockIdx.x) % a.split;
  const int row_a = tile * mma_rows + g, row_b = row_a + 8;
  // Rows past n read row 0 and batch columns past nb read x's row 0: an mma output element
  // depends only on its own row and column, and those are never stored. No predicates.
  const uint4* w = reinterpret_cast<const uint4*>(a.w);
  const uint4* wa = w + static_cast<std::size_t>(row_a < a.n ? row_a : 0) * a.k8;
  const uint4* wb = w + static_cast<std::size_t>(row_b < a.n ? row_b : 0) * a.k8;
  const uint4* xr[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int b = nt * 8 + g;
    xr[nt] =
        reinterpret_cast<const uint4*>(a.x) + static_cast<std::size_t>(b < a.nb ? b : 0) * a.k8;
  }
  const int begin = slice * a.slice_len, end = min(a.k8, begin + a.slice_len);
  gemv_prologue();

  float c[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      c[nt][e] = 0.0f;

  // Software pipeline over the warp's whole super-steps: the next one's weights are loaded
  // (into loop-carried registers) before the current one's mma's, so 2 x UNROLL x 64 bytes per
  // lane are in flight while the tensor cores work, and the compiler cannot sink the loads to
  // their uses (written as loads-then-mma's, the scheduler trades them for registers).
  constexpr int super = UNROLL * step_chunks;
  int base = begin + warp * super;
  if (base + super <= end) {
    uint4 cur[UNROLL][2][2];
    load_super_step<UNROLL, true>(cur, wa, wb, base, end, t);
    for (;;) {
      const int next = base + WPB * super;
      if (next + super > end) {
        mma_super_step<NT, UNROLL, true>(cur, xr, base, end, t, c);
        base = next;
        break;
      }
      uint4 nxt[UNROLL][2][2];
      load_super_step<UNROLL, true>(nxt, wa, wb, next, end, t);
      mma_super_step<NT, UNROLL, true>(cur, xr, base, end, t, c);
#pragma unroll
      for (int u = 0; u < UNROLL; ++u)
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
          for (int h = 0; h < 2; ++h)
            cur[u][i][h] = nxt[u][i][h];
      base = next;
    }
  }
  if (base < end) { // the slice's partial last super-step, if this warp has it
    uint4 r[UNROLL][2][2];
    load_super_step<UNROLL, false>(r, wa, wb, base, end, t);
    mma_super_step<NT, UNROLL, false>(r, xr, base, end, t, c);
  }

  finish_mma_tile<NT, WPB>(a, c, warp, g, t, tile, slice);
}

template <int NT, int UNROLL, int WPB>
cudaError_t launch_mma_one(const gemv_args& a, int blocks, cudaStream_t s) {
  // The pipeline holds 2 x UNROLL x 4 16-byte weight chunks per lane (32 registers per unit of
  // UNROLL): ptxas -v shows spills from UNROLL 8 on (255 registers) and for UNROLL 4 with 512
  // threads (128 registers), none below.
  if constexpr (UNROLL * WPB > 32) {
    return cudaErrorInvalidValue;
  } else {
    return pdl::launch(gemv_mma_kernel<NT, UNROLL, WPB>, dim3(blocks), dim3(WPB * 32), 0, s,
                       a.programmatic, 1u, a);
  }
}

template <int NT, int UNROLL>
cudaError_t launch_mma_wpb(const gemv_args& a, int wpb, int blocks, cudaStream_t s) {
  switch (wpb) {
  case 4:
    return launch_mma_one<NT, UNROLL, 4>(a, blocks, s);
  case 8:
    return launch_mma_one<NT, UNROLL, 8>(a, blocks, s);
  case 16:
    return launch_mma_one<NT, UNROLL, 16>(a, blocks, s);
  default:
    return cudaErrorInvalidValue;
  }
}

template <int NT>
cudaError_t launch_mma_unroll(const gemv_args& a, int unroll, int wpb, int blocks, cudaStream_t s) {
  switch (unroll) {
  case 2:
    return launch_mma_wpb<NT, 2>(a, wpb, blocks, s);
  case 4:
    return launch_mma_wpb<NT, 4>(a, wpb, blocks, s);
  default:
    return cudaErrorInvalidValue;
  }
}

} // namespace

cudaError_t launch_gemv_mma(const gemv_args& a, int nt, int unroll, int warps_per_block, int blocks,
                            cudaStream_t s) {
  switch (nt) {
  case 1:
    return launch_mma_unroll<1>(a, unroll, warps_per_block, blocks, s);
  case 2:
    return launch_mma_unroll<2>(a, unroll, warps_per_block, blocks, s);
  case 4:
    return launch_mma_unroll<4>(a, unroll, warps_per_block, blocks, s);
  default:
    return cudaErrorInvalidValue;
  }
}

} // namespace kg::gemv_detail
