// A plain, correct BF16 GEMV the decode engine falls back on while gemv_bf16.cu (the tuned one,
// written on another branch) is absent: y[b, n] = sum_k x[b, k] w[n, k], float32 accumulation,
// one warp per output row, lanes summed in a fixed order (deterministic). Same shapes as
// launch_gemv_bf16: x [batch, k], w [n, k], y [batch, n], k a multiple of 8.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace kg {

cudaError_t launch_gemv_bf16_simple(const __nv_bfloat16* x, const __nv_bfloat16* w,
                                    __nv_bfloat16* y, int batch, int n, int k, cudaStream_t s);

} // namespace kg
