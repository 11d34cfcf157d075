// The wgmma_pk family of the decode GEMV (kernels/decode/gemv_bf16.h): the wgmma_ws block over
// the wgmma_tiles copy of the weights (gemv_bf16_wgmma_ws.cuh has the kernel), and that copy.
//
// Why: a TMA box of 64 rows x 64 columns reads 64 runs of 128 bytes, 2 * k bytes apart, and on
// the H200 a 64-row wgmma_ws block streamed about 28 GB/s (qkv b16: 31.5 MB in 11.81 us over 96
// blocks) while a plain read of the same bytes, one contiguous window at a time, reached 77% of
// the copy bandwidth against wgmma_ws's 62.7% (docs/performance.md, GEMV configurations). The
// packed family showed the same on the mma kernel (down b8 74.5% -> 83.2% with its lanes' loads
// made consecutive). Here each stage's weights are 8 KB runs and a block's tile one range.
//
// The copy's row order is free, so the gated launch (the SwiGLU gate as the epilogue) reads a
// paired copy in which each gate row sits 8 rows above its up row: the rows one thread's
// accumulators hold (gemv_bf16_wgmma.cuh), so the gate needs no exchange between threads.
#include "kernels/decode/gemv_bf16_wgmma_ws.cuh"

namespace kg::gemv_detail {
namespace {

// One 16-byte chunk of the copy per thread: unit (tile64, kt), row r of its 64, stored chunk
// position p, which holds the row's column chunk p ^ (r % 8) (the 128-byte swizzle: a 1024-byte
// aligned stage reads as the TMA would have written it); rows past n and columns past k zero.
// paired: row r of the copy holds w's row paired_source_row(r, n) (launch_pack_wgmma_tiles).
__global__ void pack_wgmma_tiles_kernel(const uint4* __restrict__ w, uint4* __restrict__ out, int n,
                                        int k8, int k_tiles, long long chunks, bool paired) {
  constexpr int unit_chunks = wgmma_tile_unit_bytes / 16; // 512: 64 rows x 8 chunks
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < chunks;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long unit = i / unit_chunks;
    const int within = static_cast<int>(i % unit_chunks), r = within / 8, p = within % 8;
    const int row = static_cast<int>(unit / k_tiles) * 64 + r;
    const int chunk = static_cast<int>(unit % k_tiles) * 8 + (p ^ (r % 8));
    const int source = paired && row < n ? paired_source_row(row, n) : row;
    out[i] = row < n && chunk < k8 ? w[static_cast<std::size_t>(source) * k8 + chunk]
                                   : make_uint4(0, 0, 0, 0);
  }
}

} // namespace

cudaError_t launch_gemv_wgmma_pk(const gemv_args& a, int bn, int rows_per_group,
                                 int warps_per_block, int stages, int blocks, cudaStream_t s) {
  return dispatch_wgmma<wgmma_ws_launch<true>::of, ring_options<wgmma_ws_max_smem_bytes, 4, 6, 8>>(
      a, bn, rows_per_group, warps_per_block, stages, blocks, s);
}

cudaError_t launch_pack_wgmma_tiles(const __nv_bfloat16* w, __nv_bfloat16* packed, int n, int k,
                                    cudaStream_t s, bool paired) {
  if (paired && n % 16 != 0) return cudaErrorInvalidValue;
  const int k8 = k / 8, k_tiles = (k8 + gemm_tile_chunks - 1) / gemm_tile_chunks;
  const long long chunks = static_cast<long long>(wgmma_tiles_rows(n)) * k_tiles * 8;
  pack_wgmma_tiles_kernel<<<1024, 256, 0, s>>>(reinterpret_cast<const uint4*>(w),
                                               reinterpret_cast<uint4*>(packed), n, k8, k_tiles,
                                               chunks, paired);
  return cudaGetLastError();
}

} // namespace kg::gemv_detail
