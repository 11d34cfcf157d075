// Kernel durations read from the GPU's hardware counters with CUPTI's range profiler: the metric
// gpu__time_duration.sum, the one ncu reports as a kernel's "Duration". kernelgate's `counters`
// timing backend rests on it, so that its numbers are the numbers ncu gives for the same kernel.
//
// Mode: auto range (every kernel launched between begin() and end(), on any stream of the
// context, is a range of its own) with user replay and a configuration that needs exactly one
// pass, so nothing is ever replayed. A sample is the sum of its kernels' durations: what adding
// up ncu's per-kernel rows gives, gaps between kernels excluded.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <cupti_result.h>

namespace kg {

struct counter_profiler_state;

class counter_profiler {
public:
  // Sets the profiler up on the current device's context and profiles one tiny kernel to prove it
  // works here. Throws timing_error, one line starting "timing backend 'counters' unavailable: ",
  // when it cannot (no GPU, profiling restricted to admin users, another profiler attached, a
  // configuration that would need more than one pass). At most one per context: CUPTI allows one
  // range profiler object per context.
  explicit counter_profiler(std::size_t max_kernels_per_sample = 256);
  ~counter_profiler();
  counter_profiler(const counter_profiler&) = delete;
  counter_profiler& operator=(const counter_profiler&) = delete;

  // Brackets the launches of one sample's work (host calls only; neither waits for the GPU on
  // kernelgate's side). Kernels launched outside begin()/end() are not profiled.
  void begin();
  void end();
  // After the sample's work has completed: gpu__time_duration.sum of each kernel launched between
  // begin() and end(), in nanoseconds, in launch order. Throws timing_error if ranges were
  // dropped (more kernels than max_kernels_per_sample).
  std::vector<double> collect();

  static constexpr const char* metric = "gpu__time_duration.sum";

private:
  std::unique_ptr<counter_profiler_state> s_;
};

// The sample the counters backend reports for one call: the sum of its kernels' durations (ns in,
// us out). Throws timing_error when the call launched no kernel (the counters see kernels only,
// as ncu does: a call whose GPU work is all copies or memsets would read as free) or when a
// duration is not a finite non-negative number.
double counter_sample_us(const std::vector<double>& kernel_ns);

// Why the range profiler refused, with what to do about it where there is something to do.
std::string counter_profiler_hint(CUptiResult r);

} // namespace kg
