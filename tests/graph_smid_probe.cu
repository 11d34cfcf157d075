// A kernel for the placement test of test_gpu_decode_engine.cpp: each block records the SM it
// ran on (%smid) after holding it briefly, so the blocks spread over every SM they may use.
#include <cuda_runtime_api.h>

namespace kg::test {
namespace {

__global__ void record_smid(unsigned* out, long long hold_cycles) {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  const long long t0 = clock64();
  while (clock64() - t0 < hold_cycles) {
  }
  if (threadIdx.x == 0) out[blockIdx.x] = id;
}

} // namespace

cudaError_t launch_record_smid(unsigned* out, int blocks, cudaStream_t s) {
  record_smid<<<blocks, 128, 0, s>>>(out, 200000);
  return cudaGetLastError();
}

} // namespace kg::test
