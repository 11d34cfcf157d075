// The engine's GEMMs through cuBLAS: the prefill's projections over a chunk's prompt tokens and
// the decode projections of batches above the GEMV's 32 rows. cuBLAS, not a kernel of ours: these
// GEMMs are the load that real prefills put on the GPU, not a kernel under test (the decode
// GEMVs are), and a well-kept library does them near the chip's peak.
#pragma once

#include <string>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "gpu/device_buffer.h"

namespace kg {

class cublas_gemm {
public:
  // A handle bound to `stream` (any created stream; calls on it can be captured into a CUDA
  // graph: the workspace is the handle's own, so no allocation happens during a capture).
  explicit cublas_gemm(cudaStream_t stream);
  ~cublas_gemm();
  cublas_gemm(const cublas_gemm&) = delete;
  cublas_gemm& operator=(const cublas_gemm&) = delete;

  // Queues y[rows, n] = x[rows, k] w[n, k]^T in bf16 with float32 accumulation (all row-major).
  // Throws std::runtime_error naming cuBLAS's status on failure.
  void run(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, int rows, int n,
           int k);

private:
  void* handle_ = nullptr; // cublasHandle_t, kept out of this header
  device_buffer workspace_;
};

// cuBLAS's version as "major.minor.patch" (the suites record it for the prefill.gemm role).
std::string cublas_version();

} // namespace kg
