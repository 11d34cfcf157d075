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
  //
  // Its SM count target is the whole device's multiprocessor count, whatever partition the
  // stream's green context grants. cuBLAS documents bitwise-reproducible results for the same
  // architecture and number of SMs only; what reads the SM count is its choice of kernel and
  // split (its heuristics, which cublasSetSmCountTarget overrides). Pinned, the choice for a
  // shape is the same on the whole GPU and on any partition, so the co-located engine runs the
  // same kernels as the solo one; the green-partition GPU tests (test_gpu_decode_engine.cpp)
  // check the bits. A partition then runs kernels sized for the whole GPU, in more waves.
  explicit cublas_gemm(cudaStream_t stream);
  ~cublas_gemm();
  cublas_gemm(const cublas_gemm&) = delete;
  cublas_gemm& operator=(const cublas_gemm&) = delete;

  // Queues y[rows, n] = x[rows, k] w[n, k]^T in bf16 with float32 accumulation (all row-major).
  // Throws std::runtime_error naming cuBLAS's status on failure.
  void run(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, int rows, int n,
           int k);

  int sm_count_target() const { return sm_count_target_; }

private:
  void* handle_ = nullptr; // cublasHandle_t, kept out of this header
  int sm_count_target_ = 0;
  device_buffer workspace_;
};

// cuBLAS's version as "major.minor.patch" (the suites record it for the prefill.gemm role).
std::string cublas_version();

} // namespace kg
