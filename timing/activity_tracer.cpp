#include "timing/activity_tracer.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <set>
#include <unordered_map>

#include <cupti.h>

namespace kg {
namespace {

constexpr std::size_t buffer_bytes = 1u << 20;
constexpr std::size_t buffer_align = 8; // CUPTI requires 8-byte aligned activity buffers

// The activity kinds a traced call needs. RUNTIME and DRIVER records are not used themselves:
// CUPTI writes the external-correlation record (our tag) only next to an API record.
constexpr CUpti_ActivityKind traced_kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                               CUPTI_ACTIVITY_KIND_MEMCPY,
                                               CUPTI_ACTIVITY_KIND_MEMSET,
                                               CUPTI_ACTIVITY_KIND_RUNTIME,
                                               CUPTI_ACTIVITY_KIND_DRIVER,
                                               CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};

struct raw_activity {
  gpu_activity a;
  std::uint32_t correlation = 0;
};

// Filled by CUPTI's buffer-completed callback; guarded because CUPTI may call it from its own
// thread when a buffer fills between forced flushes.
struct tracer_state {
  std::mutex m;
  std::vector<raw_activity> activities;
  std::unordered_map<std::uint32_t, std::uint64_t> external; // correlation id -> tag
  std::uint64_t dropped = 0;
  bool ok = false;
  std::string why;
  // acquire() count: activity kinds are enabled while it is positive. A mutex of its own: CUPTI
  // calls made under it may deliver buffers, which takes `m`.
  std::mutex users_m;
  int users = 0;
  // Buffers are reused: a fresh 1 MB allocation per flush costs page faults inside the next
  // sample's enqueue.
  std::vector<uint8_t*> free_buffers;
};

tracer_state& state() {
  static tracer_state s;
  return s;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  auto& s = state();
  {
    std::lock_guard<std::mutex> lock(s.m);
    if (!s.free_buffers.empty()) {
      *buffer = s.free_buffers.back();
      s.free_buffers.pop_back();
      *size = buffer_bytes;
      *max_records = 0;
      return;
    }
  }
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(buffer_align, buffer_bytes));
  *size = *buffer ? buffer_bytes : 0;
  *max_records = 0; // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t* buffer, size_t,
                               size_t valid) {
  auto& s = state();
  {
    std::lock_guard<std::mutex> lock(s.m);
    CUpti_Activity* rec = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
      raw_activity r;
      switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        r.a = {k->start, k->end, k->streamId, 0, k->name};
        r.correlation = k->correlationId;
        s.activities.push_back(r);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* k = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
        r.a = {k->start, k->end, k->streamId, 0};
        r.correlation = k->correlationId;
        s.activities.push_back(r);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* k = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
        r.a = {k->start, k->end, k->streamId, 0};
        r.correlation = k->correlationId;
        s.activities.push_back(r);
        break;
      }
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(rec);
        s.external[e->correlationId] = e->externalId;
        break;
      }
      default:
        break;
      }
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS)
      s.dropped += dropped;
    if (s.free_buffers.size() < 16) {
      s.free_buffers.push_back(buffer);
      return;
    }
  }
  std::free(buffer);
}

std::string cupti_error(const char* call, CUptiResult r) {
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  return std::string(call) + ": " + (msg ? msg : "unknown CUPTI error");
}

} // namespace

activity_tracer* activity_tracer::instance(std::string* why) {
  static activity_tracer tracer;
  static std::once_flag once;
  std::call_once(once, [] {
    auto& s = state();
    // A context must exist before CUPTI can attach to it; with no GPU this is where it ends.
    if (const cudaError_t e = cudaFree(nullptr); e != cudaSuccess) {
      s.why = std::string("no CUDA context: ") + cudaGetErrorString(e);
      return;
    }
    if (auto r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
        r != CUPTI_SUCCESS) {
      s.why = cupti_error("cuptiActivityRegisterCallbacks", r);
      return;
    }
    // Enabled once to learn whether CUPTI may trace here (another profiler attached, no
    // permission), then off until a caller acquires it.
    for (auto kind : traced_kinds) {
      if (auto r = cuptiActivityEnable(kind); r != CUPTI_SUCCESS) {
        s.why = cupti_error("cuptiActivityEnable", r);
        return;
      }
    }
    for (auto kind : traced_kinds)
      cuptiActivityDisable(kind);
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    s.ok = true;
  });
  auto& s = state();
  if (!s.ok) {
    if (why) *why = s.why;
    return nullptr;
  }
  return &tracer;
}

void activity_tracer::acquire() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.users_m);
  if (s.users++ == 0)
    for (auto kind : traced_kinds)
      cuptiActivityEnable(kind);
}

void activity_tracer::release() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.users_m);
  if (s.users > 0 && --s.users == 0)
    for (auto kind : traced_kinds)
      cuptiActivityDisable(kind);
}

void activity_tracer::begin(std::uint64_t tag) {
  cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, tag);
}

void activity_tracer::end() {
  std::uint64_t last = 0;
  cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
}

std::vector<gpu_activity> activity_tracer::collect(const std::vector<std::uint64_t>& tags) {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.m);
  const std::set<std::uint64_t> wanted(tags.begin(), tags.end());
  std::vector<gpu_activity> out;
  for (const auto& r : s.activities) {
    const auto it = s.external.find(r.correlation);
    if (it == s.external.end() || !wanted.count(it->second)) continue;
    gpu_activity a = r.a;
    a.tag = it->second;
    out.push_back(a);
  }
  return out;
}

void activity_tracer::clear() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.m);
  s.activities.clear();
  s.external.clear();
}

std::uint64_t activity_tracer::dropped() const {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.m);
  return s.dropped;
}

activity_span summarize_activity(const std::vector<gpu_activity>& work, std::uint64_t open_ns,
                                 std::uint64_t close_ns, std::uint32_t home_stream) {
  activity_span out;
  if (work.empty()) return out;
  out.any = true;
  std::uint64_t first = work.front().start_ns, last = work.front().end_ns;
  std::set<std::uint32_t> streams;
  for (const auto& a : work) {
    first = std::min(first, a.start_ns);
    last = std::max(last, a.end_ns);
    streams.insert(a.stream_id);
    if (home_stream != 0 && a.stream_id != home_stream && !out.off_home) {
      out.off_home = true;
      out.off_home_stream = a.stream_id;
    }
    const bool early = open_ns != 0 && a.start_ns < open_ns;
    const bool late = close_ns != 0 && a.end_ns > close_ns;
    if ((early || late) && !out.outside_window) {
      out.outside_window = true;
      out.outside_stream = a.stream_id;
    }
  }
  out.activities = static_cast<int>(work.size());
  out.streams = static_cast<int>(streams.size());
  out.span_us = static_cast<double>(last - first) * 1e-3;
  return out;
}

} // namespace kg
