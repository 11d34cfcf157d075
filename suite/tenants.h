// What runs beside the decode engine when a workload co-locates it (the decode-colocated*
// workloads and the suites' partitioned set-ups): a memory-bandwidth hog, LoRA rank-8 training
// of Qwen3-4B with K jobs, and the green partition whose grant is nearest the 99 / 33 SM
// split. Each tenant runs on a thread of its own until stopped (background_loop.h).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include <cuda_runtime_api.h>
#include <nlohmann/json.hpp>

#include "gpu/green_partition.h"
#include "kernels/hogs.h"
#include "suite/background_loop.h"

namespace kg {

// Keeps a memory-bandwidth hog running on `stream` (launches of 50 ms back to back) until
// stopped; a CUDA error in the thread is kept and rethrown by stop().
class background_hog {
public:
  background_hog(cudaStream_t stream, int sms, double clock_mhz);
  // Stops the hog; returns the bytes it moved per launch on average.
  double stop();

private:
  contention_hog hog_;
  double bytes_ = 0;
  long launches_ = 0;
  background_loop loop_; // last: its thread uses the members above
};

// The LoRA base's, adapters' and batches' seed of every Qwen3-4B LoRA workload, and their
// learning rate (lora-train-qwen3-4b's).
inline constexpr std::uint64_t lora_seed = 20261129;
inline constexpr double lora_training_lr = 1e-3;

// LoRA rank-8 training of Qwen3-4B (q and v, sequence 2048, bfloat16), `jobs` jobs over one base,
// stepping back to back on `stream` until stopped. Each finished step's job-0 loss and host-clock
// seconds are kept; an exception in the thread (LibTorch's, CUDA's) is kept and rethrown by
// wait_first_step() or stop().
class background_training {
public:
  background_training(cudaStream_t stream, int device, int jobs = 1);
  // Blocks until the first step has finished (the model is drawn and training runs), so that
  // what is measured next runs beside training, not beside its set-up.
  void wait_first_step();
  std::size_t steps();
  struct result {
    std::vector<double> losses, seconds;
  };
  result stop();
  // Job 0's first step: its loss, gradient and adapters after the update (lora_adapters::flat()
  // order), for the gates against a reference step from the same state. Empty before it.
  struct first_step {
    double loss = 0;
    std::vector<double> grad, params_after;
  };
  first_step first();
  // The steps finished so far (a copy; training goes on).
  result snapshot();

private:
  std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
  std::vector<double> losses_, seconds_;
  first_step first_;
  background_loop loop_; // last: its thread uses the members above
};

// The partition whose grant is nearest colocation_target(): the request for target.decode SMs,
// which the driver rounds up to its grain, and the grant just below it, found by lowering the
// request one SM at a time until the grant drops -- so the grain need not be known (the
// min_partition() and alignment() the driver reports are recorded, not relied on). Every grant
// tried goes into *record. Throws std::runtime_error when no partition can be made.
green_partition nearest_partition(nlohmann::json* record);

} // namespace kg
