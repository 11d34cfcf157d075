// The GEMV kernels with rows_per_warp = 1 (one TU per rows_per_warp: they compile in parallel).
#include "kernels/decode/gemv_bf16_kernel.cuh"

namespace kg::gemv_detail {
template cudaError_t launch_gemv_rows<1>(const gemv_args&, int, int, int, int, cudaStream_t);
} // namespace kg::gemv_detail
