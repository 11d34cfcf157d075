// Two tenants on one GPU in CUDA green contexts (issue: workloads under test): the device's SMs
// split into a group of about `first_sms` and the rest, each with a green context and a stream,
// so decode and training run side by side on disjoint SMs. The driver rounds the request to its
// partition granularity; what it granted is recorded. Driver functions are looked up through the
// runtime (cudaGetDriverEntryPointByVersion): nothing links libcuda, and a machine without a GPU
// or a driver without green contexts gets a reason instead of a partition.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

namespace kg {

class green_partition {
public:
  // Splits device `device` into a first group of at least `first_sms` SMs (rounded up as the
  // driver requires) and the remaining SMs. nullopt with `why` set when it cannot.
  static std::optional<green_partition> create(int device, unsigned first_sms, std::string* why);
  ~green_partition();
  green_partition(green_partition&&) noexcept;
  green_partition& operator=(green_partition&&) = delete;
  green_partition(const green_partition&) = delete;
  green_partition& operator=(const green_partition&) = delete;

  unsigned total_sms() const;     // the device's SMs as the driver reports them
  unsigned first_sms() const;     // granted to the first group
  unsigned rest_sms() const;      // granted to the rest
  unsigned min_partition() const; // the driver's minimum partition size
  unsigned alignment() const;     // ... and co-scheduling alignment
  cudaStream_t first_stream() const;
  cudaStream_t rest_stream() const;

  struct state;

private:
  explicit green_partition(std::unique_ptr<state> s);
  std::unique_ptr<state> s_;
};

// The SM id (%smid) each of `blocks` blocks of a short kernel ran on, launched on `stream`
// (the placement check: a partition's kernels must stay on its SMs). Waits for the stream.
std::vector<unsigned> sm_ids_of_blocks(cudaStream_t stream, int blocks);

} // namespace kg
