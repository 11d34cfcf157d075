// The host side of the TMA-fed wgmma families (wgmma_tma, wgmma_ws, wgmma_pk): their two tensor
// maps, their ring's shared memory and the launch, for one instantiation of their kernel.
#pragma once

#include <cuda.h>

#include "kernels/decode/gemv_bf16_kernel.cuh"
#include "kernels/decode/gemv_bf16_wgmma.cuh"
#include "kernels/decode/tensor_map.h"

namespace kg::gemv_detail {

constexpr int tma_tile_elements = gemm_tile_chunks * 8; // a k tile: 64 bf16 columns

// `kernel` (taking the weights' map, the x map and the args) on `blocks` blocks of `threads`:
// w_map in boxes of the block's rows x one k tile, x_map in boxes of BN batch rows x one k tile
// (rows past n and nb, and columns past k, arrive as zeros). The maps are encoded on the host
// (no device call) and passed by value as __grid_constant__ parameters. packed_w: a.w is the
// wgmma_tiles copy, read by plain bulk copies; w_map is then left zero (unused).
template <int MT, int BN, int WG, int STAGES, class Kernel>
cudaError_t launch_tma_fed(Kernel kernel, int threads, const gemv_args& a, int blocks,
                           cudaStream_t s, bool packed_w = false) {
  constexpr int smem_bytes = wgmma_ring_bytes<MT, BN, WG, STAGES>;
  CUtensorMap w_map{}, x_map;
  cudaError_t e = packed_w
                      ? cudaSuccess
                      : kg::decode::encode_bf16_tile_map(w_map, a.w, a.n, a.k8 * 8,
                                                         wg_block_rows<MT, WG>, tma_tile_elements);
  if (e == cudaSuccess)
    e = kg::decode::encode_bf16_tile_map(x_map, a.x, a.nb, a.k8 * 8, BN, tma_tile_elements);
  if (e != cudaSuccess) return e;
  e = allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem_bytes);
  if (e != cudaSuccess) return e;
  // a.cluster (wgmma_ws and wgmma_pk): a tile's split blocks run as one cluster.
  return pdl::launch(kernel, dim3(blocks), dim3(threads), smem_bytes, s, a.programmatic,
                     a.cluster ? static_cast<unsigned>(a.split) : 1u, w_map, x_map, a);
}

} // namespace kg::gemv_detail
