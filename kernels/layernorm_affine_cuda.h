// CUDA LayerNorm kernels of the affine ablation: the correct formula, its six altered formulas,
// and an independently written correct kernel. Plain C++ interface (no CUDA types beyond the
// stream) so host code compiled by g++ can call it.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "mutants/affine_formula.h"
#include "workloads/layernorm_affine.h"

namespace kg {

// Device pointers. x, y: [rows, cols]; w, b: [cols]; elements of `type` (float32 or float16).
// The correct formula and the altered ones: one block per row, two-pass mean/variance in float,
// rounding to the dtype after normalization and after each affine operation (eager semantics).
void launch_layernorm_affine(affine_formula f, dtype type, const void* x, const void* w,
                             const void* b, void* y, std::int64_t rows, std::int64_t cols,
                             float eps, cudaStream_t stream);
// Independent correct kernel: one warp per row, Welford with Chan's merge across lanes,
// fma affine in float, a single rounding.
void launch_layernorm_independent(dtype type, const void* x, const void* w, const void* b, void* y,
                                  std::int64_t rows, std::int64_t cols, float eps,
                                  cudaStream_t stream);

// Copies the inputs to the device, runs one kernel (independent when `independent`), copies back.
host_tensor run_layernorm_cuda(affine_formula f, bool independent, const layernorm_inputs& in,
                               double eps);

} // namespace kg
