// TMA tensor maps of row-major bf16 matrices, for kernels that load tiles with
// cp.async.bulk.tensor (the GEMV's wgmma_tma family). The encoder is the driver's
// cuTensorMapEncodeTiled, reached through the runtime's entry-point query, so nothing links the
// driver library (the CPU machines that build and test this have none).
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

namespace kg::decode {

// `map` <- the [rows][cols] bf16 matrix at `base` (16-byte aligned, rows cols x 2 bytes apart,
// cols a multiple of 8) in boxes of box_rows x box_cols elements (box_cols x 2 <= 128 bytes,
// box_rows <= 256), each box landing in shared memory with the 128-byte swizzle (16-byte chunk c
// of box row r at chunk c XOR r % 8, the layout wgmma's K-major descriptors read), elements past
// the matrix as zeros. cudaErrorInvalidValue for arguments outside these limits or refused by the
// encoder; the query's error where the driver has no encoder.
cudaError_t encode_bf16_tile_map(CUtensorMap& map, const void* base, int rows, int cols,
                                 int box_rows, int box_cols);

} // namespace kg::decode
