// GPU activity of a call, as CUPTI's activity API records it: the start and end of every kernel,
// memcpy and memset the call launched, on any stream. kernelgate uses it two ways: as a timing
// backend (the span from the first to the last activity of the call) and as an auditor for the
// event and graph backends (activity of the call that ran outside the timed window, e.g. work on
// a side stream that started while the measuring stream was held, is caught and reported).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

namespace kg {

struct gpu_activity {
  std::uint64_t start_ns = 0, end_ns = 0; // CUPTI timestamps (one clock for all activities)
  std::uint32_t stream_id = 0;
  std::uint64_t tag = 0; // the id pushed around the API call that launched it
  // A kernel's (mangled) name, owned by CUPTI and shared by every record of that kernel; null for
  // memcpys and memsets.
  const char* name = nullptr;
};

// CUPTI's activity API is per process (one set of buffer callbacks), so the tracer is too: the
// first call to instance() enables it; later calls share it. Records are matched to calls through
// external correlation ids pushed around each traced call's API calls on this thread.
class activity_tracer {
public:
  // nullptr when CUPTI cannot trace here (no GPU, another profiler attached, no permission);
  // `why` then says why.
  static activity_tracer* instance(std::string* why = nullptr);

  // Tracing costs host time on every CUDA call, so it is on only between acquire() and the
  // matching release() (counted: nested users share it).
  void acquire();
  void release();
  // Every CUDA API call this thread makes between begin(tag) and end() is tagged `tag` (> 0).
  void begin(std::uint64_t tag);
  void end();
  // Delivers every buffered record (forced flush) and returns those tagged with one of `tags`.
  // Call after the traced work has completed; records stay until clear().
  std::vector<gpu_activity> collect(const std::vector<std::uint64_t>& tags);
  void clear(); // forget every record gathered so far

  // Records CUPTI reported as dropped (buffers full) since the tracer started.
  std::uint64_t dropped() const;

  activity_tracer(const activity_tracer&) = delete;
  activity_tracer& operator=(const activity_tracer&) = delete;

private:
  activity_tracer() = default;
};

// One sample's view of a traced call between a holding activity (ends when the timed window
// opens) and a trailing one (starts after the window closes).
struct activity_span {
  bool any = false;                  // the call launched any GPU activity
  double span_us = 0;                // first start to last end of the call's activities
  int activities = 0;                // kernels, memcpys and memsets of the call
  int streams = 0;                   // distinct streams they ran on
  bool outside_window = false;       // some activity began before the window opened or ended after
  std::uint32_t outside_stream = 0;  // the stream of the first such activity
  bool off_home = false;             // some activity ran on a stream other than the call's own
  std::uint32_t off_home_stream = 0; // the first such stream
};
// `work`: the call's activities; window_open/close_ns: end of the holding activity and start of the
// trailing one (0 when unknown: that side is not judged); home_stream: the stream the call was
// given (where the holding activity ran; 0 when unknown: not judged).
activity_span summarize_activity(const std::vector<gpu_activity>& work,
                                 std::uint64_t window_open_ns, std::uint64_t window_close_ns,
                                 std::uint32_t home_stream = 0);

} // namespace kg
