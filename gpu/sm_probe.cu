// The placement probe of green_partition.h: each block records the SM it ran on.
#include "gpu/green_partition.h"

#include "gpu/cuda_check.h"
#include "gpu/device_buffer.h"

namespace kg {
namespace {

// Each block holds its SM for about 20 us (so a partition's blocks spread over all its SMs
// instead of a few SMs taking them all) and records %smid.
__global__ void record_smid(unsigned* out) {
  if (threadIdx.x != 0) return;
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  const long long start = clock64();
  while (clock64() - start < 40'000) {
  }
  out[blockIdx.x] = id;
}

} // namespace

std::vector<unsigned> sm_ids_of_blocks(cudaStream_t stream, int blocks) {
  device_buffer ids(static_cast<std::size_t>(blocks) * sizeof(unsigned));
  record_smid<<<blocks, 32, 0, stream>>>(static_cast<unsigned*>(ids.get()));
  KG_CUDA_CHECK(cudaGetLastError());
  std::vector<unsigned> out(static_cast<std::size_t>(blocks));
  KG_CUDA_CHECK(cudaMemcpyAsync(out.data(), ids.get(), ids.size(), cudaMemcpyDeviceToHost, stream));
  KG_CUDA_CHECK(cudaStreamSynchronize(stream));
  return out;
}

} // namespace kg
