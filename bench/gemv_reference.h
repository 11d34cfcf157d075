// The GEMV sweep's independent device reference and its input fill (bench/gemv_sweep.cpp):
// deliberately the plainest code that can be right, sharing nothing with kernels/decode.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace kg {

// p[i] = a hash of (seed, i) mapped to [-scale, scale), rounded to bf16. Fast enough for the
// 389M-element lm_head weight, where host generation would take seconds.
void fill_bf16_hash(__nv_bfloat16* p, std::size_t count, std::uint32_t seed, float scale,
                    cudaStream_t s);

// y[b, r] = sum_k x[b, k] w[r, k] in float32, k in order, one thread per output (no rounding to
// bf16). Throws kg::cuda_error if the launch fails.
void gemv_reference_f32(const __nv_bfloat16* x, const __nv_bfloat16* w, float* y, int batch, int n,
                        int k, cudaStream_t s);

// The read ceiling of a weight: reads `bytes` (a multiple of 16, p 16-byte aligned) once,
// contiguously, with `blocks` x 256 threads each keeping `unroll` (4, 8 or 16) 16-byte loads in
// flight, and xors them into sink[block] (so no load is dead code). No arithmetic beyond that:
// what any GEMV of this weight could at best reach. Throws kg::cuda_error if the launch fails.
void read_stream(const void* p, std::size_t bytes, unsigned* sink, int blocks, int unroll,
                 cudaStream_t s);

// The same read by Hopper bulk async copies (sm_90): block b of `blocks` x 256 threads copies the
// b-th contiguous slice of `bytes` (a multiple of 16, p 16-byte aligned) into shared memory, up
// to 96 KB a round, every byte of a round in flight at once, and xors it into sink[block]: what a
// kernel whose loads are all issued up front (a TMA or bulk-copy ring) could reach.
void read_bulk(const void* p, std::size_t bytes, unsigned* sink, int blocks, cudaStream_t s);

} // namespace kg
