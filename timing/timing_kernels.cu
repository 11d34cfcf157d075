#include "timing/cuda_check.h"
#include "timing/timing_kernels.h"

namespace kg {
namespace {

__device__ __forceinline__ std::uint64_t global_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void blocking_kernel(const volatile int* flag, std::uint64_t timeout_ns,
                                clock_probe* probe) {
  const std::uint64_t t0 = global_ns();
  const long long c0 = clock64();
  std::uint64_t t = t0;
  int timed_out = 0;
  while (*flag == 0) {
    t = global_ns();
    if (t - t0 > timeout_ns) {
      timed_out = 1;
      break;
    }
  }
  const long long c1 = clock64();
  t = global_ns();
  probe->cycles = static_cast<std::uint64_t>(c1 - c0);
  probe->ns = t - t0;
  probe->timed_out = timed_out;
}

__global__ void clock_probe_kernel(clock_probe* out, std::uint64_t span_ns) {
  const std::uint64_t t0 = global_ns();
  const long long c0 = clock64();
  std::uint64_t t1 = t0;
  while (t1 - t0 < span_ns)
    t1 = global_ns();
  const long long c1 = clock64();
  out->cycles = static_cast<std::uint64_t>(c1 - c0);
  out->ns = t1 - t0;
}

__global__ void spin_kernel(std::int64_t cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

} // namespace

void launch_blocking_kernel(const volatile int* flag, std::uint64_t timeout_ns, clock_probe* probe,
                            cudaStream_t stream) {
  blocking_kernel<<<1, 1, 0, stream>>>(flag, timeout_ns, probe);
  KG_CUDA_CHECK(cudaGetLastError());
}

void launch_clock_probe(clock_probe* out, std::uint64_t span_ns, cudaStream_t stream) {
  clock_probe_kernel<<<1, 1, 0, stream>>>(out, span_ns);
  KG_CUDA_CHECK(cudaGetLastError());
}

void launch_spin_kernel(std::int64_t cycles, int blocks, cudaStream_t stream) {
  spin_kernel<<<blocks, 1, 0, stream>>>(cycles);
  KG_CUDA_CHECK(cudaGetLastError());
}

} // namespace kg
