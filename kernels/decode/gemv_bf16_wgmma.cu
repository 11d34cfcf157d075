// The wgmma family of the decode GEMV (kernels/decode/gemv_bf16.h): batch 16 to 128 on Hopper's
// warpgroup tensor-core instructions. The gemm family (gemv_bf16_gemm.cu) reads both operands out
// of shared memory into registers with ldmatrix before each mma.sync; on the H200 its best
// configurations at batch 64-128 stayed at 0.4-0.7x cuBLAS (docs/performance.md, GEMV
// configurations). Here wgmma.mma_async reads them from shared memory itself, through matrix
// descriptors, so the warps issue one instruction per 64 x bn x 16 product and no operand
// traffic through registers.
//
// The ring is the gemm family's (gemv_bf16_stage.cuh): per 64-element k tile a stage holds the
// block's BM weight rows and the group's BN x rows, 128 bytes a row, chunks XOR-swizzled by the
// row's low three bits -- the layout a wgmma descriptor calls K-major with the 128-byte swizzle,
// when the stage starts on a 1024-byte boundary (the dynamic shared memory is aligned up to one
// here). Both operands are K-major: A is the weights (M = rows), B is x (N = batch rows), the
// product A B^T is y^T's tile. A block has WG warpgroups of 128 threads; warpgroup g computes MT
// tiles of 64 rows from row g x MT x 64 of the block's tile, all BN batch columns.
//
// Per k tile: every thread waits for its cp.async copies, fences them for the async proxy
// (wgmma reads shared memory through it), and the block meets at a barrier; then each warpgroup
// issues its 4 (k16 steps) x MT wgmma's, commits them and waits for them before the stage may be
// refilled. Accumulators: for m64nNk16 with f32, thread t of a warpgroup holds, for each n8
// column tile j, d[4j + e]: row 16 (t / 32) + (t % 32) / 4 + 8 (e / 2), column 8j + 2 (t % 4) +
// e % 2 -- the mma.sync m16n8 layout once per warp and n8 tile.
//
// Each warpgroup adds its k tiles in ascending order and split K ends with the other families'
// fixed-order slice sum: the bits do not depend on which SMs run the blocks.
#include <cstdint>

#include "kernels/decode/gemv_bf16_kernel.cuh"
#include "kernels/decode/gemv_bf16_stage.cuh"

namespace kg::gemv_detail {
namespace {

using kg::decode::cp_async_commit;
using kg::decode::cp_async_wait;

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

template <int MT, int BN, int WG, int STAGES>
__global__ void __launch_bounds__(WG * 128) gemv_wgmma_kernel(const gemv_args a) {
  constexpr int threads = WG * 128, bm = wg_block_rows<MT, WG>;
  constexpr int stage_size = wg_stage_bytes<MT, BN, WG>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const unsigned raw = static_cast<unsigned>(__cvta_generic_to_shared(smem_raw));
  const unsigned base = (raw + smem_align - 1) & ~static_cast<unsigned>(smem_align - 1);
  unsigned char* smem = smem_raw + (base - raw);
  const int tid = static_cast<int>(threadIdx.x), wg = tid / 128, t = tid % 128;
  const ring_slice r = block_slice<bm>(a);
  const int slice = r.slice, row0 = r.row0, kt0 = r.kt0, count = r.count;
  auto stage = [&](int i) { return smem + (i % STAGES) * stage_size; };
  start_ring<bm, BN, threads, STAGES, stage_size>(smem, a, r, tid);

  float c[MT][BN / 2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int e = 0; e < BN / 2; ++e)
      c[mt][e] = 0.0f;

  for (int i = 0; i < count; ++i) {
    cp_async_wait<STAGES - 2>(); // k tile i has landed (this thread's copies) ...
    fence_async_proxy();         // ... is visible to wgmma's reads ...
    __syncthreads();             // ... and so is every thread's; tile i - 1's slot is free
    const int next = i + STAGES - 1;
    if (next < count) load_stage<bm, BN, threads>(stage(next), a, row0, kt0 + next, tid);
    cp_async_commit();
    const unsigned s = base + static_cast<unsigned>((i % STAGES) * stage_size);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < gemm_tile_chunks / 2; ++ks) {
      const std::uint64_t b = smem_desc(s + bm * row_bytes + ks * 32);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        wgmma_bf16<BN>(c[mt], smem_desc(s + (wg * MT + mt) * 64 * row_bytes + ks * 32), b);
    }
    wgmma_commit();
    wgmma_wait_all(); // the stage is read before a later iteration refills it
  }

  const int warp = t / 32, lane = t % 32, g = lane / 4, q = lane % 4;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int e = 0; e < BN / 2; ++e) {
      const int row = row0 + (wg * MT + mt) * 64 + warp * 16 + g + ((e % 4) >= 2 ? 8 : 0);
      const int b = (e / 4) * 8 + 2 * q + (e & 1);
      if (row >= a.n || b >= a.nb) continue;
      if (a.split == 1)
        a.y[static_cast<std::size_t>(b) * a.n + row] = __float2bfloat16(c[mt][e]);
      else
        a.partial[slice * a.slice_stride + static_cast<long long>(b) * a.n + row] = c[mt][e];
    }
  if (a.split > 1) finish_split_k(a, r.tile, bm);
}

template <int MT, int BN, int WG, int STAGES>
cudaError_t launch_wgmma_one(const gemv_args& a, int blocks, cudaStream_t s) {
  constexpr int smem_bytes = STAGES * wg_stage_bytes<MT, BN, WG> + smem_align;
  constexpr int rows = wg_block_rows<MT, WG>;
  // The limits gemv_config_supported checks on the host: nothing outside them is compiled.
  if constexpr (MT * BN / 2 > wgmma_max_accumulators || rows > gemm_max_tile_rows ||
                smem_bytes > wgmma_max_smem_bytes) {
    return cudaErrorInvalidValue;
  } else {
    auto kernel = gemv_wgmma_kernel<MT, BN, WG, STAGES>;
    const cudaError_t e = allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem_bytes);
    if (e != cudaSuccess) return e;
    return pdl::launch(kernel, dim3(blocks), dim3(WG * 128), smem_bytes, s, a.programmatic, 1u, a);
  }
}

template <int MT, int BN, int WG>
cudaError_t launch_wgmma_stages(const gemv_args& a, int stages, int blocks, cudaStream_t s) {
  switch (stages) {
  case 3:
    return launch_wgmma_one<MT, BN, WG, 3>(a, blocks, s);
  case 4:
    return launch_wgmma_one<MT, BN, WG, 4>(a, blocks, s);
  default:
    return cudaErrorInvalidValue;
  }
}

template <int MT, int BN>
cudaError_t launch_wgmma_groups(const gemv_args& a, int warps_per_block, int stages, int blocks,
                                cudaStream_t s) {
  switch (warps_per_block) {
  case 4:
    return launch_wgmma_stages<MT, BN, 1>(a, stages, blocks, s);
  case 8:
    return launch_wgmma_stages<MT, BN, 2>(a, stages, blocks, s);
  default:
    return cudaErrorInvalidValue;
  }
}

template <int MT>
cudaError_t launch_wgmma_cols(const gemv_args& a, int bn, int warps_per_block, int stages,
                              int blocks, cudaStream_t s) {
  switch (bn) {
  case 16:
    return launch_wgmma_groups<MT, 16>(a, warps_per_block, stages, blocks, s);
  case 32:
    return launch_wgmma_groups<MT, 32>(a, warps_per_block, stages, blocks, s);
  case 64:
    return launch_wgmma_groups<MT, 64>(a, warps_per_block, stages, blocks, s);
  case 128:
    return launch_wgmma_groups<MT, 128>(a, warps_per_block, stages, blocks, s);
  default:
    return cudaErrorInvalidValue;
  }
}

} // namespace

cudaError_t launch_gemv_wgmma(const gemv_args& a, int bn, int rows_per_group, int warps_per_block,
                              int stages, int blocks, cudaStream_t s) {
  switch (rows_per_group) {
  case 64:
    return launch_wgmma_cols<1>(a, bn, warps_per_block, stages, blocks, s);
  case 128:
    return launch_wgmma_cols<2>(a, bn, warps_per_block, stages, blocks, s);
  default:
    return cudaErrorInvalidValue;
  }
}

} // namespace kg::gemv_detail
