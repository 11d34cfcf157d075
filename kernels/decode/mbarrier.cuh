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
