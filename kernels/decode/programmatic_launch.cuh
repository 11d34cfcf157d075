// Programmatic dependent launch (Hopper), as the decode step uses it: a kernel launched with
// `programmatic` set may be scheduled before the kernel ahead of it in the stream has finished,
// so its launch latency overlaps that kernel's tail. Every kernel the decode step launches this
// way calls wait() before it touches memory that earlier kernels write or read.
//
// Why it is correct: griddepcontrol.wait returns once every prerequisite grid has completed and
// its memory operations are visible, and a kernel that has passed wait() completes only after
// its own predecessor did, so the chain of waits orders every kernel after all earlier ones.
// A kernel launched plainly (the tests, the sweeps, the harness, which must not overlap the L2
// flush with the timed kernel) sees both instructions as no-ops.
//
// When a kernel calls allow_dependents() decides where the next kernel's blocks land. Blocks
// scheduled early fill whichever SMs free up first, up to the kernel's occupancy: harmless for a
// kernel of a few blocks, but a GEMV placed that way behind a still-running GEMV ran with some
// SMs holding twice the blocks of others (with every kernel allowing its successor at its start
// the step was slower than with plain launches: docs/architecture.md). So the GEMVs, whose
// successors are small (norms, the q/k prologue, the SiLU gate, argmax), allow theirs at their
// start; the small kernels allow theirs right after their own wait: the GEMV ahead has then left
// the GPU, so the next GEMV (or the attention's stage 1) spreads over every SM as a plain launch
// would, and its blocks start their first weight (or K/V) loads while the small kernel runs.
#pragma once

#include <utility>

#include <cuda_runtime.h>

namespace kg::pdl {

// Blocks until the grids this one depends on programmatically have completed and their writes
// are visible; returns at once for a plain launch.
__device__ __forceinline__ void wait() {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
}

// Lets the next programmatic launch be scheduled once every block of this grid has called it (or
// exited); see above for where.
__device__ __forceinline__ void allow_dependents() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

// kernel<<<grid, block, smem, s>>>(args...), with programmatic stream serialization when
// `programmatic` and as clusters of cluster_x blocks along x when cluster_x > 1. A driver or
// stream that refuses the programmatic attribute (cudaErrorNotSupported) gets a launch without
// it: the same kernel and bits, only the launch gap is not hidden (the error is not sticky).
template <typename... Params, typename... Args>
cudaError_t launch(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem,
                   cudaStream_t s, bool programmatic, unsigned cluster_x, Args&&... args) {
  cudaLaunchConfig_t lc{};
  lc.gridDim = grid;
  lc.blockDim = block;
  lc.dynamicSmemBytes = smem;
  lc.stream = s;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (cluster_x > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster_x;
    attr[n].val.clusterDim.y = 1;
    attr[n].val.clusterDim.z = 1;
    ++n;
  }
  const unsigned without_pdl = n;
  if (programmatic) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  lc.attrs = attr;
  lc.numAttrs = n;
  cudaError_t e = cudaLaunchKernelEx(&lc, kernel, std::forward<Args>(args)...);
  if (e == cudaErrorNotSupported && n > without_pdl) {
    (void)cudaGetLastError();
    lc.numAttrs = without_pdl;
    e = cudaLaunchKernelEx(&lc, kernel, std::forward<Args>(args)...);
  }
  return e != cudaSuccess ? e : cudaGetLastError();
}

} // namespace kg::pdl
