#include "kernels/decode/gemm_cublas.h"

#include <stdexcept>
#include <string>

#include <cublas_v2.h>

#include "gpu/cuda_check.h"

namespace kg {
namespace {

// cuBLAS's status codes are not cudaError_t: its own check, naming the call.
void check(cublasStatus_t s, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(call) + " failed: " + cublasGetStatusString(s));
}
#define KG_CUBLAS_CHECK(call) check((call), #call)

// Enough for the Hopper kernels cuBLAS picks at these shapes (its guide suggests 32 MiB there).
constexpr std::size_t workspace_bytes = std::size_t{32} << 20;

cublasHandle_t as_handle(void* h) {
  return static_cast<cublasHandle_t>(h);
}

} // namespace

cublas_gemm::cublas_gemm(cudaStream_t stream) : workspace_(workspace_bytes) {
  cublasHandle_t h = nullptr;
  KG_CUBLAS_CHECK(cublasCreate(&h));
  handle_ = h;
  try {
    KG_CUBLAS_CHECK(cublasSetStream(h, stream));
    KG_CUBLAS_CHECK(cublasSetWorkspace(h, workspace_.get(), workspace_.size()));
    // The whole device's SMs, not the partition's (the header says why).
    int device = 0;
    KG_CUDA_CHECK(cudaGetDevice(&device));
    KG_CUDA_CHECK(
        cudaDeviceGetAttribute(&sm_count_target_, cudaDevAttrMultiProcessorCount, device));
    KG_CUBLAS_CHECK(cublasSetSmCountTarget(h, sm_count_target_));
  } catch (...) {
    (void)cublasDestroy(h);
    throw;
  }
}

cublas_gemm::~cublas_gemm() {
  if (handle_) (void)cublasDestroy(as_handle(handle_));
}

void cublas_gemm::run(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, int rows,
                      int n, int k) {
  const float one = 1.0f, zero = 0.0f;
  // Column-major view: y^T [n, rows] = (w as k x n)^T (x as k x rows).
  KG_CUBLAS_CHECK(cublasGemmEx(as_handle(handle_), CUBLAS_OP_T, CUBLAS_OP_N, n, rows, k, &one, w,
                               CUDA_R_16BF, k, x, CUDA_R_16BF, k, &zero, y, CUDA_R_16BF, n,
                               CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

std::string cublas_version() {
  int v[3] = {0, 0, 0};
  const libraryPropertyType what[3] = {MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL};
  for (int i = 0; i < 3; ++i)
    KG_CUBLAS_CHECK(cublasGetProperty(what[i], &v[i]));
  return std::to_string(v[0]) + "." + std::to_string(v[1]) + "." + std::to_string(v[2]);
}

} // namespace kg
