// The GEMV kernels with rows_per_warp = 2 (one TU per rows_per_warp: they compile in parallel).
#include "kernels/decode/gemv_bf16_kernel.cuh"

namespace kg::gemv_detail {
template cudaError_t launch_gemv_rows<2>(const gemv_args&, int, int, int, int, cudaStream_t);
} // namespace kg::gemv_detail
