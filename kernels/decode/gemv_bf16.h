// The decode engine's GEMV / skinny GEMM (issue: workloads under test): y[b, n] = sum_k x[b, k]
// w[n, k] in BF16 with float32 accumulation, for batch 1..32 and the Qwen3-4B projections. The
// configuration (how rows, K and the batch are split over warps and blocks) is chosen per
// (batch, n, k) by pick_gemv_config; bench/gemv_sweep times every configuration side by side.
// Deterministic: a split-K sums its partial results in a fixed order (no atomics), so a GEMV
// gives the same bits whatever SMs it runs on -- the solo vs co-located logits gate needs that.
#pragma once

#include <cstddef>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace kg {

struct gemv_config {
  int rows_per_warp = 1;   // output rows one warp computes (its x loads serve all of them)
  int warps_per_block = 8; // 32 x this threads per block
  int unroll = 2;          // 16-byte weight loads in flight per lane and row
  int split_k = 1;         // K cut into this many slices; > 1 needs a workspace
};

// The configuration the decode engine uses for this shape: one launch_gemv_bf16 accepts for
// every shape it accepts at all (k % 8 == 0).
gemv_config pick_gemv_config(int batch, int n, int k);

// Whether launch_gemv_bf16 accepts this configuration and shape (the rules below).
bool gemv_config_supported(const gemv_config& c, int batch, int n, int k);

// Bytes of workspace a configuration needs (0 when split_k == 1). The workspace must hold this
// many bytes and be zero-filled once before its first use; every launch leaves it ready for the
// next, whatever configuration and shape that one has (one workspace can serve every projection
// in turn). Launches that may run concurrently need separate workspaces.
std::size_t gemv_workspace_bytes(const gemv_config& c, int batch, int n, int k);

// Queues y = x w^T on `s`. x: [batch, k], w: [n, k], y: [batch, n], all dense row-major; k must
// be a multiple of 8 (16-byte rows), x and w 16-byte aligned, any n and batch >= 1 (batches
// above 32 / rows_per_warp take several launches). Supported: rows_per_warp 1, 2, 4; unroll 2, 4,
// 8 with rows_per_warp x unroll <= 16; warps_per_block 4, 8, 16; split_k 1, 2, 4, 8 (split_k > 1:
// at most 65536 row tiles of rows_per_warp x warps_per_block rows). Returns
// cudaErrorInvalidValue for anything else (before touching the device), else the launch's error.
cudaError_t launch_gemv_bf16(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y,
                             int batch, int n, int k, const gemv_config& c, void* workspace,
                             cudaStream_t s);

} // namespace kg
