// The Hopper warpgroup MMA pieces of the decode GEMV's wgmma families (gemv_bf16_wgmma.cu fills
// its ring with cp.async, gemv_bf16_wgmma_tma.cu with TMA): shared-memory matrix descriptors of
// the ring's 128-byte-swizzled K-major stages, wgmma.mma_async m64nNk16 (bf16 in, f32
// accumulators) and its fences, and the store of a warpgroup's accumulators.
//
// Accumulators: for m64nNk16 with f32, thread t of a warpgroup holds, for each n8 column tile j,
// d[4j + e]: row 16 (t / 32) + (t % 32) / 4 + 8 (e / 2), column 8j + 2 (t % 4) + e % 2 -- the
// mma.sync m16n8 layout once per warp and n8 tile.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/decode/gemv_bf16_kernel.cuh"
#include "kernels/decode/gemv_bf16_launch.h"
#include "kernels/decode/gemv_bf16_stage.cuh"

namespace kg::gemv_detail {

// A shared-memory operand: K-major, 128-byte swizzle (bits 62-63 = 1), 1024 bytes between
// 8-row groups (the stride field, in 16-byte units); the leading-offset field is unused by this
// layout and set to 1. `addr`: the shared address of the operand's first row at this k16 step
// (the step's 32 bytes into the 128-byte row; the hardware applies the swizzle to it).
__device__ __forceinline__ std::uint64_t smem_desc(unsigned addr) {
  return static_cast<std::uint64_t>((addr >> 4) & 0x3FFF) | (std::uint64_t{1} << 16) |
         (std::uint64_t{1024 >> 4} << 32) | (std::uint64_t{1} << 62);
}

__device__ __forceinline__ void fence_async_proxy() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_wait_all() {
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void wgmma_bf16(float (&d)[N / 2], std::uint64_t a, std::uint64_t b);

// d (+)= A B^T, m64n16k16: 8 accumulators a thread (module comment for their layout).
template <>
__device__ __forceinline__ void wgmma_bf16<16>(float (&d)[8], std::uint64_t a, std::uint64_t b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7"
               "}, %8, %9, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
                 "+f"(d[7])
               : "l"(a), "l"(b), "r"(1)
               : "memory");
}

// d (+)= A B^T, m64n32k16: 16 accumulators a thread (module comment for their layout).
template <>
__device__ __forceinline__ void wgmma_bf16<32>(float (&d)[16], std::uint64_t a, std::uint64_t b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, "
               "%8, %9, %10, %11, %12, %13, %14, %15"
               "}, %16, %17, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
                 "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]),
                 "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
               : "l"(a), "l"(b), "r"(1)
               : "memory");
}

// d (+)= A B^T, m64n40k16 and m64n48k16 (the wgmma_sw family's weight tiles as N: 20 and 24
// accumulators a thread).
template <>
__device__ __forceinline__ void wgmma_bf16<40>(float (&d)[20], std::uint64_t a, std::uint64_t b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %22, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n40k16.f32.bf16.bf16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, "
               "%8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19"
               "}, %20, %21, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
                 "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]),
                 "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]),
                 "+f"(d[19])
               : "l"(a), "l"(b), "r"(1)
               : "memory");
}

template <>
__device__ __forceinline__ void wgmma_bf16<48>(float (&d)[24], std::uint64_t a, std::uint64_t b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %26, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n48k16.f32.bf16.bf16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, "
               "%8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23"
               "}, %24, %25, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
                 "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]),
                 "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]),
                 "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
               : "l"(a), "l"(b), "r"(1)
               : "memory");
}

// d (+)= A B^T, m64n64k16: 32 accumulators a thread (module comment for their layout).
template <>
__device__ __forceinline__ void wgmma_bf16<64>(float (&d)[32], std::uint64_t a, std::uint64_t b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, "
               "%8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, "
               "%24, %25, %26, %27, %28, %29, %30, %31"
               "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
                 "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]),
                 "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]),
                 "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
                 "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),
                 "+f"(d[31])
               : "l"(a), "l"(b), "r"(1)
               : "memory");
}

// d (+)= A B^T, m64n80k16: 40 accumulators a thread (module comment for their layout).
template <>
__device__ __forceinline__ void wgmma_bf16<80>(float (&d)[40], std::uint64_t a, std::uint64_t b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %42, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, "
               "%8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, "
               "%24, %25, %26, %27, %28, %29, %30, %31, "
               "%32, %33, %34, %35, %36, %37, %38, %39"
               "}, %40, %41, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
                 "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]),
                 "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]),
                 "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
                 "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),
                 "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),
                 "+f"(d[37]), "+f"(d[38]), "+f"(d[39])
               : "l"(a), "l"(b), "r"(1)
               : "memory");
}

// d (+)= A B^T, m64n96k16: 48 accumulators a thread (module comment for their layout).
template <>
__device__ __forceinline__ void wgmma_bf16<96>(float (&d)[48], std::uint64_t a, std::uint64_t b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %50, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, "
               "%8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, "
               "%24, %25, %26, %27, %28, %29, %30, %31, "
               "%32, %33, %34, %35, %36, %37, %38, %39, "
               "%40, %41, %42, %43, %44, %45, %46, %47"
               "}, %48, %49, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
                 "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]),
                 "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]),
                 "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
                 "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),
                 "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),
                 "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),
                 "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
               : "l"(a), "l"(b), "r"(1)
               : "memory");
}

// d (+)= A B^T, m64n128k16: 64 accumulators a thread (module comment for their layout).
template <>
__device__ __forceinline__ void wgmma_bf16<128>(float (&d)[64], std::uint64_t a, std::uint64_t b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, "
               "%8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, "
               "%24, %25, %26, %27, %28, %29, %30, %31, "
               "%32, %33, %34, %35, %36, %37, %38, %39, "
               "%40, %41, %42, %43, %44, %45, %46, %47, "
               "%48, %49, %50, %51, %52, %53, %54, %55, "
               "%56, %57, %58, %59, %60, %61, %62, %63"
               "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
                 "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]),
                 "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]),
                 "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
                 "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),
                 "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),
                 "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),
                 "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
                 "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]),
                 "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]),
                 "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
               : "l"(a), "l"(b), "r"(1)
               : "memory");
}

// A block's weight rows and the bytes of one stage.
template <int MT, int WG>
constexpr int wg_block_rows = MT * 64 * WG;
template <int MT, int BN, int WG>
constexpr int wg_stage_bytes = (wg_block_rows<MT, WG> + BN) * row_bytes;
constexpr int smem_align = 1024; // the 128-byte swizzle's atom: a stage starts on one
// The dynamic shared memory of a ring of STAGES stages, with room to align it.
template <int MT, int BN, int WG, int STAGES>
constexpr int wgmma_ring_bytes = STAGES* wg_stage_bytes<MT, BN, WG> + smem_align;

// The ring's start: the first 1024-byte boundary of the dynamic shared memory at `raw` (the
// launch asks for smem_align bytes more than the ring); `base` <- its shared-space address.
__device__ __forceinline__ unsigned char* align_ring(unsigned char* raw, unsigned& base) {
  const unsigned at = static_cast<unsigned>(__cvta_generic_to_shared(raw));
  base = (at + smem_align - 1) & ~static_cast<unsigned>(smem_align - 1);
  return raw + (base - at);
}

template <int MT, int N>
__device__ __forceinline__ void zero_accumulators(float (&c)[MT][N]) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int e = 0; e < N; ++e)
      c[mt][e] = 0.0f;
}

// Waits until at most one commit group of this warpgroup's wgmma's is pending.
__device__ __forceinline__ void wgmma_wait_all_but_one() {
  asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
}

// Keeps the compiler from moving reads or writes of the accumulators across this point (after a
// wgmma wait: the registers hold the finished sums only from there on).
template <int MT, int N>
__device__ __forceinline__ void pin_accumulators(float (&c)[MT][N]) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int e = 0; e < N; ++e)
      asm volatile("" : "+f"(c[mt][e])::"memory");
}

// One k tile of warpgroup `wg`: its MT 64-row tiles of the stage at shared address `s` (the
// block's BM weight rows, then the x rows) times the x rows, four k16 steps, issued as one commit
// group and not waited for.
template <int MT, int BN, int BM>
__device__ __forceinline__ void mma_stage_issue(float (&c)[MT][BN / 2], unsigned s, int wg) {
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < gemm_tile_chunks / 2; ++ks) {
    const std::uint64_t b = smem_desc(s + BM * row_bytes + ks * 32);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
      wgmma_bf16<BN>(c[mt], smem_desc(s + (wg * MT + mt) * 64 * row_bytes + ks * 32), b);
  }
  wgmma_commit();
}

// ... and waited for, so the stage may be refilled once every warpgroup has passed this.
template <int MT, int BN, int BM>
__device__ __forceinline__ void mma_stage(float (&c)[MT][BN / 2], unsigned s, int wg) {
  mma_stage_issue<MT, BN, BM>(c, s, wg);
  wgmma_wait_all();
  pin_accumulators(c);
}

// Where thread t's accumulator e of an m64nN tile sits (the layout above): m its row of the 64,
// n its column.
struct wgmma_position {
  int m, n;
};
__device__ __forceinline__ wgmma_position wgmma_accumulator_at(int t, int e) {
  const int warp = t / 32, lane = t % 32;
  return {warp * 16 + lane / 4 + ((e % 4) >= 2 ? 8 : 0), (e / 4) * 8 + 2 * (lane % 4) + (e & 1)};
}

// A warpgroup's accumulators c[mt] (64 rows from `row0` + 64 mt, bn batch columns) -> y in bf16
// (slice < 0), or -> slice `slice`'s fp32 partials; rows past n and columns past nb dropped.
template <int MT, int BN>
__device__ __forceinline__ void store_wgmma_to(const float (&c)[MT][BN / 2], const gemv_args& a,
                                               int row0, int t, int slice) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int e = 0; e < BN / 2; ++e) {
      const wgmma_position p = wgmma_accumulator_at(t, e);
      const int row = row0 + mt * 64 + p.m, b = p.n;
      if (row >= a.n || b >= a.nb) continue;
      if (slice < 0)
        store_y(a, static_cast<std::size_t>(b) * a.n + row, c[mt][e]);
      else
        a.partial[slice * a.slice_stride + static_cast<long long>(b) * a.n + row] = c[mt][e];
    }
}

// The gated epilogue (a.gated; the paired copy, split 1): accumulators e and e + 2 (e % 4 < 2) of
// a thread are copy rows m and m + 8 of one column, gate row j = 8 (row / 16) + row % 16 and its
// up row; y[b][j] gets the SiLU gate of the two sums each rounded to bf16, the arithmetic of the
// SiLU-gate kernel after launch_gemv_bf16 (decode_math.cuh), so the bits of those two launches.
template <int MT, int BN>
__device__ __forceinline__ void store_wgmma_gated(const float (&c)[MT][BN / 2], const gemv_args& a,
                                                  int row0, int t) {
  const int half = a.n / 2;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int e = 0; e < BN / 2; ++e) {
      if (e % 4 >= 2) continue; // (the up rows, taken with their gate rows)
      const wgmma_position p = wgmma_accumulator_at(t, e);
      const int row = row0 + mt * 64 + p.m, j = row / 16 * 8 + row % 16, b = p.n;
      if (row >= a.n || b >= a.nb) continue;
      a.y[static_cast<std::size_t>(b) * half + j] =
          kg::decode::math::silu_gate(__bfloat162float(__float2bfloat16(c[mt][e])),
                                      __bfloat162float(__float2bfloat16(c[mt][e + 2])));
    }
}

// ... to y without split K, else to the block's slice.
template <int MT, int BN>
__device__ __forceinline__ void store_wgmma_tile(const float (&c)[MT][BN / 2], const gemv_args& a,
                                                 int row0, int t, int slice) {
  store_wgmma_to<MT, BN>(c, a, row0, t, a.split == 1 ? -1 : slice);
}

// The rings a family offers: its stage counts and the most shared memory one may take.
template <int MaxSmem, int... Stages>
struct ring_options {};
using wgmma_rings = ring_options<wgmma_max_smem_bytes, 3, 4>; // wgmma, wgmma_tma

// The run-time (rows a warpgroup, batch tile, warps, stages) of a launch -> Launch<MT, BN, WG,
// STAGES>::run(a, blocks, s), compiled only within the limits gemv_config_supported checks on
// the host (accumulators, rows a block, ring bytes); cudaErrorInvalidValue outside them.
template <template <int, int, int, int> class Launch, int MT, int BN, int WG, int STAGES,
          int MaxSmem>
cudaError_t wgmma_one(const gemv_args& a, int blocks, cudaStream_t s) {
  constexpr int rows = wg_block_rows<MT, WG>;
  constexpr int ring = wgmma_ring_bytes<MT, BN, WG, STAGES>;
  if constexpr (MT * BN / 2 > wgmma_max_accumulators || rows > gemm_max_tile_rows || ring > MaxSmem)
    return cudaErrorInvalidValue;
  else
    return Launch<MT, BN, WG, STAGES>::run(a, blocks, s);
}

template <template <int, int, int, int> class Launch, int MT, int BN, int WG, int MaxSmem,
          int... Stages>
cudaError_t wgmma_stages(ring_options<MaxSmem, Stages...>, const gemv_args& a, int stages,
                         int blocks, cudaStream_t s) {
  cudaError_t e = cudaErrorInvalidValue;
  (void)((stages == Stages &&
          (e = wgmma_one<Launch, MT, BN, WG, Stages, MaxSmem>(a, blocks, s), true)) ||
         ...);
  return e;
}

template <template <int, int, int, int> class Launch, class Rings, int MT, int BN>
cudaError_t wgmma_groups(const gemv_args& a, int warps_per_block, int stages, int blocks,
                         cudaStream_t s) {
  switch (warps_per_block) {
  case 4:
    return wgmma_stages<Launch, MT, BN, 1>(Rings{}, a, stages, blocks, s);
  case 8:
    return wgmma_stages<Launch, MT, BN, 2>(Rings{}, a, stages, blocks, s);
  default:
    return cudaErrorInvalidValue;
  }
}

template <template <int, int, int, int> class Launch, class Rings, int MT>
cudaError_t wgmma_cols(const gemv_args& a, int bn, int warps_per_block, int stages, int blocks,
                       cudaStream_t s) {
  switch (bn) {
  case 16:
    return wgmma_groups<Launch, Rings, MT, 16>(a, warps_per_block, stages, blocks, s);
  case 32:
    return wgmma_groups<Launch, Rings, MT, 32>(a, warps_per_block, stages, blocks, s);
  case 64:
    return wgmma_groups<Launch, Rings, MT, 64>(a, warps_per_block, stages, blocks, s);
  case 128:
    return wgmma_groups<Launch, Rings, MT, 128>(a, warps_per_block, stages, blocks, s);
  default:
    return cudaErrorInvalidValue;
  }
}

// Every wgmma family's launch: Launch<MT, BN, WG, STAGES> for the run-time fields, within Rings.
template <template <int, int, int, int> class Launch, class Rings = wgmma_rings>
cudaError_t dispatch_wgmma(const gemv_args& a, int bn, int rows_per_group, int warps_per_block,
                           int stages, int blocks, cudaStream_t s) {
  switch (rows_per_group) {
  case 64:
    return wgmma_cols<Launch, Rings, 1>(a, bn, warps_per_block, stages, blocks, s);
  case 128:
    return wgmma_cols<Launch, Rings, 2>(a, bn, warps_per_block, stages, blocks, s);
  default:
    return cudaErrorInvalidValue;
  }
}

} // namespace kg::gemv_detail
