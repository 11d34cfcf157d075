// Internal to the worker (sandbox/worker.cpp, sandbox/worker_timing.cpp): device buffers described
// for kg_run, and what a serving worker keeps from one manifest to the next.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <nlohmann/json.hpp>

#include "gpu/cuda_raii.h"
#include "kernels/abi/kg_candidate.h"
#include "timing/gpu_timer.h"
#include "timing/timing_kernels.h"

namespace kg {

using kg_run_fn = int (*)(const kg_tensor*, int, kg_tensor*, int, cudaStream_t);

struct cuda_failure {
  std::string what;
};
// The worker itself could not do its part (an output file it cannot write: a full scratch):
// code 4, never the candidate's fault.
struct harness_failure {
  std::string what;
};

void check_cuda(cudaError_t e, const char* call); // throws cuda_failure
// A file's bytes onto the device through `staging` (throws cuda_failure if its size is not the
// tensor's), and a tensor's bytes into a file the same way.
struct device_tensor;
// kg_run's description of a dense tensor (no data pointer yet), and its size in bytes.
kg_tensor describe_tensor(int dtype_code, const std::vector<std::int64_t>& shape);
std::size_t tensor_bytes(const kg_tensor& t);
void write_bytes(const void* p, std::size_t n, const std::string& file); // throws harness_failure
// A file of exactly `bytes` read into `staging` (throws cuda_failure if missing, of another size or
// unreadable); returns where it lies.
char* read_into_staging(const std::string& file, std::size_t bytes, pinned_buffer& staging);
void upload_file(device_tensor& d, const std::string& file, pinned_buffer& staging);
void download_file(const device_tensor& d, const std::string& file, pinned_buffer& staging);

// One tensor on the device, described for kg_run. Scrubbed before it is freed: the next
// candidate in this worker gets the same inputs, and a fresh allocation can hand back this
// memory -- an earlier candidate's correct output would otherwise be there to copy (KernelBench's
// freed-buffer exploit).
//   With `guard` > 0 (the audit's "guard_bytes"), the tensor sits inside one allocation with a
// guard on each side of max(guard, its own size) bytes filled with 0xff (NaN for floats): a
// candidate that reads a little out of bounds gets NaN instead of a crash that ends the worker
// (PyTorch's caching allocator, under the checkers the audit models, packs tensors into larger
// blocks the same way), and a write there is seen (guards_intact).
struct device_tensor {
  void* ptr = nullptr;
  std::size_t bytes = 0;
  kg_tensor t{};
  void* base = nullptr;  // the allocation (ptr - guard_size)
  std::size_t guard_size = 0;
  device_tensor(int dtype_code, const std::vector<std::int64_t>& shape, std::size_t guard = 0);
  ~device_tensor();
  device_tensor(const device_tensor&) = delete;
  device_tensor(device_tensor&& o) noexcept
      : ptr(o.ptr), bytes(o.bytes), t(o.t), base(o.base), guard_size(o.guard_size) {
    o.ptr = nullptr;
    o.base = nullptr;
  }
  // Both guards still 0xff (true without guards); throws cuda_failure.
  bool guards_intact(cudaStream_t stream) const;
};

struct timing_data;     // sandbox/worker_timing.cpp
struct timing_state;    // sandbox/worker_timing.cpp
struct resident_state;  // sandbox/resident_inputs.h
struct pooled_buffers;  // sandbox/resident_inputs.h

struct worker_session {
  cudaStream_t stream = nullptr;
  std::string timer_key; // the options the timer was made with
  std::unique_ptr<gpu_timer> timer;
  std::size_t free_bytes_at_start = 0; // device memory free with only the session's own state
  bool rebaseline = false;             // the session's own state grew (a new timer)
  int threads_at_start = 0;
  bool runtime_started = false;
  std::string candidate_runtime;
  // The candidate loaded last: kept across the manifests of one evaluation (correctness, the
  // re-runs of a failing draw, timing), so state it keeps between calls shows in every one.
  std::string so_path;
  void* so = nullptr;
  // Timing prepared ahead (a "prepare_timing_of" manifest, run while other workers may use the
  // GPU: sets loaded, verified, baseline loaded) for the timing manifest at prepared_for.
  std::string prepared_for;
  std::shared_ptr<timing_state> prepared;
  std::size_t prepared_bytes = 0; // its device memory, each allocation rounded up to 2 MiB
  // Holds the stream busy during some correctness calls (a kernel cannot tell checked calls by
  // an idle stream).
  std::unique_ptr<mapped_host<int>> hold_flag;
  std::unique_ptr<mapped_host<clock_probe>> hold_probe;
  pinned_buffer staging; // every file read onto the device and every output read back
  // Manifests with "resident_bytes" (the audit): inputs kept on the device across candidates,
  // buffers reused (sandbox/resident_inputs.h). Made on first use.
  std::unique_ptr<resident_state> resident;
  // Manifests with "pool_bytes" (the audit's default): fresh inputs and guards, pooled blocks.
  std::unique_ptr<pooled_buffers> pooled;
  worker_session();
  ~worker_session();
};

gpu_timer& session_timer(worker_session& s, const timing_options& o);

// Loads the "timing" object's input sets onto the device (masters, expected outputs).
std::shared_ptr<timing_data> load_timing_data(const nlohmann::json& timing, pinned_buffer& staging);

// Everything before the measurement itself: the sets on the device, the buffer sets, every set
// verified (a failure is the timing's verdict: nothing is timed), the baseline loaded.
std::shared_ptr<timing_state> prepare_timing(const nlohmann::json& timing, kg_run_fn run,
                                             worker_session& session);

// Honest timing of a candidate that passed (sandbox/worker_timing.cpp): verification of every
// input set, honest_work over rotating sets, then ABBA pairs against the baseline.
nlohmann::json time_candidate(const nlohmann::json& t, const std::string& manifest_path,
                              kg_run_fn run, worker_session& session);

} // namespace kg
