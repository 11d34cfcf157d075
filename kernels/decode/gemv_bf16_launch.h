// Internal to kernels/decode/gemv_bf16*.cu: the arguments of one GEMV launch (one batch group)
// and the per-rows_per_warp launchers, each compiled in its own TU so the ~120 kernel
// instantiations build in parallel.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace kg::gemv_detail {

struct gemv_args {
  const __nv_bfloat16* x = nullptr; // rows [b0, b0 + nb) of the caller's x: [nb][k]
  const __nv_bfloat16* w = nullptr; // [n][k]
  __nv_bfloat16* y = nullptr;       // rows [b0, b0 + nb) of the caller's y: [nb][n]
  float* partial = nullptr;     // split_k > 1: slice s of batch row b at s * slice_stride + b * n
  unsigned* counters = nullptr; // split_k > 1: one per row tile, 0 between launches
  long long slice_stride = 0;   // floats between two slices' partials
  int nb = 0;                   // valid batch rows in this group (<= the template's group)
  int n = 0;
  int k8 = 0;        // k / 8: 16-byte chunks per row
  int split = 1;     // K slices
  int slice_len = 0; // chunks per slice (the last one may be shorter or empty)
};

// Queues one batch group. bg: the batch group size the kernel is compiled for (power of two,
// rows_per_warp * bg <= 32); blocks: row tiles x split. cudaErrorInvalidValue for a combination
// that has no kernel.
template <int RowsPerWarp>
cudaError_t launch_gemv_rows(const gemv_args& a, int bg, int unroll, int warps_per_block,
                             int blocks, cudaStream_t s);

extern template cudaError_t launch_gemv_rows<1>(const gemv_args&, int, int, int, int, cudaStream_t);
extern template cudaError_t launch_gemv_rows<2>(const gemv_args&, int, int, int, int, cudaStream_t);
extern template cudaError_t launch_gemv_rows<4>(const gemv_args&, int, int, int, int, cudaStream_t);

} // namespace kg::gemv_detail
