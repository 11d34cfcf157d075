// Hopper shared-memory barriers and the asynchronous bulk copies that complete on them, shared by
// the GEMV's bulk family (1-D bulk copies, gemv_bf16_bulk.cu) and its wgmma_tma and wgmma_ws
// families (2-D tensor copies through a tensor map, gemv_bf16_wgmma_tma.cu, gemv_bf16_wgmma_ws.cu).
#pragma once

#include <cstdint>

#include <cuda.h> // CUtensorMap

namespace kg::decode {

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(unsigned long long* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count)
               : "memory");
}

// The barrier initialisation must be visible to the async proxy (the copies' complete_tx)
// before any copy is issued.
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// Arrives once (the barrier's only expected arrival) and adds `bytes` to its transaction count:
// the phase completes when the copies have delivered that many bytes.
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}

// Arrives once, no transaction bytes (a consumer releasing a stage to its producer).
__device__ __forceinline__ void mbar_arrive(unsigned long long* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// Waits for the completion of the barrier's phase with parity `parity` (acquire: the copied
// bytes are visible to this thread afterwards).
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) {
  unsigned done;
  do {
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n"
                 "}"
                 : "=r"(done)
                 : "r"(smem_addr(bar)), "r"(parity)
                 : "memory");
  } while (!done);
}

// global -> shared, `bytes` (a multiple of 16, both addresses 16-byte aligned), completion
// counted on `bar`.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes,
                                          unsigned long long* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
               "[%3];" ::"r"(smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
}

// The box of `map` at element coordinates (c0 along the contiguous dimension, c1 along the
// other) -> shared memory at dst, in the map's swizzle; elements outside the tensor arrive as
// zeros and count towards the box's bytes on `bar`. `map` must be a kernel parameter
// (__grid_constant__) or in global memory.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int c0, int c1,
                                            unsigned long long* bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
               "[%0], [%1, {%2, %3}], [%4];" ::"r"(smem_addr(dst)),
               "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_addr(bar))
               : "memory");
}

// tma_load_2d's box delivered to every block of the cluster whose rank's bit is set in `mask`:
// each receives it at dst's offset in its own shared memory and counts its bytes on the barrier at
// bar's offset in its own shared memory. Every receiving block must have initialized that barrier
// (a cluster barrier after mbar_init) and must not be reading that part of its ring.
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const CUtensorMap* map, int c0,
                                                      int c1, unsigned long long* bar,
                                                      unsigned short mask) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
               ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(smem_addr(dst)),
               "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_addr(bar)),
               "h"(mask)
               : "memory");
}

// One arrival on the barrier at bar's offset in the shared memory of the cluster's block of rank
// `rank` (this block's own included). The arrival's release is the default, CTA scope: a release
// at cluster scope is a fence a warp waits on (an arrival per k tile that way made the shared x
// tile 2.5-4x slower than a block's own loads: docs/performance.md). What the arrival orders
// here is the wgmma's reads of a stage, already complete (wgmma.wait_group), before the loads
// that the receiving block's producer issues after its wait.
__device__ __forceinline__ void mbar_arrive_cluster(unsigned long long* bar, unsigned rank) {
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(remote)
               : "r"(smem_addr(bar)), "r"(rank));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}

// Starts the DRAM read of `bytes` (a multiple of 16, 16-byte aligned) at `src` into L2.
__device__ __forceinline__ void bulk_prefetch_l2(const void* src, unsigned bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
}

// Starts the DRAM read of the box of `map` at (c0, c1) into L2, nothing written to shared memory.
__device__ __forceinline__ void tma_prefetch_2d(const CUtensorMap* map, int c0, int c1) {
  asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];" ::"l"(
                   reinterpret_cast<std::uint64_t>(map)),
               "r"(c0), "r"(c1)
               : "memory");
}

} // namespace kg::decode
