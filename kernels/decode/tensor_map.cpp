// The TMA tensor-map encoder (kernels/decode/tensor_map.h).
#include "kernels/decode/tensor_map.h"

#include <cstdint>

#include <cudaTypedefs.h>

namespace kg::decode {
namespace {

// The driver's encoder, looked up once (thread-safe static initialisation); null where the
// driver lacks it. 12000: the ABI version the typedef below names.
PFN_cuTensorMapEncodeTiled_v12000 encoder(cudaError_t& error) {
  static cudaError_t looked_up = cudaSuccess;
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    looked_up = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                                 cudaEnableDefault, &found);
    if (looked_up == cudaSuccess && found != cudaDriverEntryPointSuccess)
      looked_up = cudaErrorNotSupported;
    return looked_up == cudaSuccess ? reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p)
                                    : nullptr;
  }();
  error = looked_up;
  return fn;
}

} // namespace

cudaError_t encode_bf16_tile_map(CUtensorMap& map, const void* base, int rows, int cols,
                                 int box_rows, int box_cols) {
  if (!base || rows <= 0 || cols <= 0 || cols % 8 != 0 || box_rows <= 0 || box_rows > 256 ||
      box_cols <= 0 || box_cols * 2 > 128 || reinterpret_cast<std::uintptr_t>(base) % 16 != 0)
    return cudaErrorInvalidValue;
  cudaError_t error = cudaSuccess;
  const auto encode = encoder(error);
  if (!encode) return error;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) * 2}; // bytes between rows
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r =
      encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides, box,
             element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

} // namespace kg::decode
