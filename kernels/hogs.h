// Contention tenants for the tenant mixes (issue: workloads under test): kernels that keep one
// resource of whatever SMs their stream owns busy for a set time -- a memory-bandwidth hog that
// streams a buffer larger than L2 (read and write), a compute hog that chains FMAs in registers
// -- so a tenant's time can be measured beside them. They run until the GPU clock says the
// time is up; nothing they compute is used.
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

namespace kg {

class contention_hog {
public:
  enum class kind { memory_bandwidth, compute };
  // `bytes`: the memory hog's buffer (its default, 1 GiB, is 20x the H200's L2).
  explicit contention_hog(kind k, std::size_t bytes = std::size_t{1} << 30);
  ~contention_hog();
  contention_hog(const contention_hog&) = delete;
  contention_hog& operator=(const contention_hog&) = delete;

  // Enqueues the hog on `stream` for about `microseconds` of GPU time at the current SM clock
  // (`clock_mhz`: the clock used to turn time into cycles), one block per SM of `sms`.
  void launch(cudaStream_t stream, double microseconds, double clock_mhz, int sms);
  // Bytes moved (memory hog) or FMAs done (compute hog) by the last launch, read after it ended.
  double work_done(cudaStream_t stream);

private:
  kind kind_;
  void* buffer_ = nullptr;
  std::size_t bytes_ = 0;
  unsigned long long* counter_ = nullptr;
};

} // namespace kg
