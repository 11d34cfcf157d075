#include "timing/gpu_timer.h"
#include "base/name_table.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <thread>

#include "base/rng.h"
#include "gpu/cuda_raii.h"
#include "gpu/device_buffer.h"
#include "timing/activity_tracer.h"
#include "timing/counter_profiler.h"
#include "timing/interrupt.h"
#include "timing/timing_kernels.h"

namespace kg {

namespace {

constexpr name_table<timing_backend, 5> backend_names{{{timing_backend::automatic, "auto"},
                                                       {timing_backend::events, "events"},
                                                       {timing_backend::graph, "graph"},
                                                       {timing_backend::cupti, "cupti"},
                                                       {timing_backend::counters, "counters"}}};

} // namespace

std::string_view timing_backend_name(timing_backend b) {
  return name_of(backend_names, b, "events");
}

std::optional<timing_backend> parse_timing_backend(std::string_view s) {
  return parse_name(backend_names, s);
}

nlohmann::json timing_options::to_json() const {
  return {{"backend", timing_backend_name(backend)},
          {"warmup", warmup},
          {"warmup_wall_seconds", warmup_wall_seconds},
          {"trace_activity", trace_activity},
          {"audit_every", audit_every},
          {"single_stream", single_stream},
          {"nvml_per_sample", nvml_per_sample},
          {"min_samples", min_samples},
          {"max_samples", max_samples},
          {"min_gpu_seconds", min_gpu_seconds},
          {"enough_samples", enough_samples},
          {"target_rel_halfwidth", target_rel_halfwidth},
          {"max_wall_seconds", max_wall_seconds},
          {"clock_floor", clock_floor},
          {"backoff_ms", backoff_ms},
          {"flush_l2", flush_l2},
          {"l2_flush", "a kernel writes 2x the device's L2 size (new contents every sample), "
                       "then one discards those lines (discard.global.L2): L2 is left empty"},
          {"persisting_l2_reset", true},
          {"blocking_timeout_ns", blocking_timeout_ns}};
}

namespace {
nlohmann::json clocks_json(const nvml_clocks& c) {
  auto opt = [](const std::optional<unsigned>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json("unavailable");
  };
  return {{"sm_current_mhz", opt(c.sm_current)},
          {"mem_current_mhz", opt(c.mem_current)},
          {"sm_application_mhz", opt(c.sm_application)},
          {"throttle_reasons",
           c.throttle_mask ? nlohmann::json(c.throttle_reasons) : nlohmann::json("unavailable")},
          {"locked",
           c.clocks_locked ? nlohmann::json(*c.clocks_locked) : nlohmann::json("unavailable")}};
}

double probe_mhz(const clock_probe& p) {
  // Spans under 1 us are too coarse for %globaltimer's resolution: not a measurement.
  return p.ns >= 1000 ? static_cast<double>(p.cycles) * 1000.0 / static_cast<double>(p.ns) : 0.0;
}
} // namespace

nlohmann::json timing_result::to_json(bool with_samples) const {
  if (status != "TIMED") // no time for an implementation that failed its checks
    return {{"backend", backend},
            {"status", status},
            {"status_reason", status_reason},
            {"activity_audit", activity_audit},
            {"samples_taken", samples.size()},
            {"output_checks", output_checks},
            {"fresh_check_at", fresh_check_at}};
  nlohmann::json j = {{"backend", backend},
                      {"samples_taken", samples.size()},
                      {"samples_kept", kept_us.size()},
                      {"samples_discarded", discarded},
                      {"median_us", summary.median},
                      {"q1_us", summary.q1},
                      {"q3_us", summary.q3},
                      {"mad_us", summary.mad},
                      {"mean_us", summary.mean},
                      {"min_us", summary.min},
                      {"max_us", summary.max},
                      {"median_ci95_us", {median_ci.lo, median_ci.hi}},
                      {"ci_method", ci_method_name(median_ci.method)},
                      {"ci_seed", median_ci.seed},
                      {"sm_clock_mhz", {{"modal", modal_mhz}, {"min", min_mhz}, {"max", max_mhz}}},
                      {"stop_reason", stop_reason},
                      {"activity_audit", activity_audit},
                      {"warmup_samples", warmup_samples},
                      {"wall_seconds", wall_seconds},
                      {"gpu_seconds", gpu_seconds},
                      {"host_enqueue_us_median", host_us_median},
                      {"host_enqueue_us_traced_median", host_us_traced_median},
                      {"traced_samples", traced_samples},
                      {"nvml_before", clocks_json(nvml_before)},
                      {"nvml_after", clocks_json(nvml_after)},
                      {"status", status},
                      {"status_reason", status_reason},
                      {"output_checks", output_checks},
                      {"fresh_check_at", fresh_check_at}};
  if (kernels_per_call >= 0) {
    j["counter_metric"] = counter_profiler::metric;
    j["kernels_per_call"] = kernels_per_call;
  }
  if (with_samples) {
    nlohmann::json raw = nlohmann::json::array();
    for (const auto& s : samples)
      raw.push_back({s.gpu_us, s.event_us, s.activity_us, s.activity_streams, s.sm_mhz,
                     s.nvml_sm_mhz, s.throttle_mask, s.host_us, s.discarded});
    j["raw_samples"] = {{"columns",
                         {"gpu_us", "event_us", "activity_us", "activity_streams", "sm_mhz",
                          "nvml_sm_mhz", "throttle_mask", "host_us", "discarded"}},
                        {"rows", raw}};
  }
  return j;
}

struct gpu_timer::state {
  cuda_stream stream;
  cuda_event start, stop;
  mapped_host<int> flag;
  mapped_host<std::array<clock_probe, 2>> probes;
  device_buffer flush;
  device_buffer flush_seq{sizeof(unsigned)}; // advanced by the blocking kernel every sample
  int flush_blocks = 0;                      // 4 per SM (all resident at once), queried once
  // The flush (fill + discard), captured once: one graph launch costs the host about half of
  // one kernel launch (docs/performance.md, The timing loop).
  cuda_graph_exec prefix;
  activity_tracer* tracer = nullptr; // null: CUPTI unavailable or not asked for
  std::string tracer_why;
  std::uint64_t next_tag = 0;
  std::uint64_t samples_seen = 0;
  rng audit_pick{0x617564697431ull, stream_id("audit")};
  bool always_traced = false; // cupti backend: tracing held on for the timer's lifetime
  std::unique_ptr<counter_profiler> counters; // counters backend only
  // Opened once per timer: loading NVML and nvmlInit cost tens of ms, paid per measurement when
  // each run opened its own (docs/performance.md).
  nvml_session nvml;
};

gpu_timer::gpu_timer(const timing_options& opt) : opt_(opt), s_(std::make_unique<state>()) {
  int device = 0, l2 = 0;
  KG_CUDA_CHECK(cudaGetDevice(&device));
  KG_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  int sms = 0;
  KG_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  s_->flush_blocks = 4 * sms;
  if (opt_.flush_l2) s_->flush = device_buffer(2 * static_cast<std::size_t>(l2));
  KG_CUDA_CHECK(cudaMemset(s_->flush_seq.get(), 0, sizeof(unsigned)));
  {
    cudaGraph_t g = nullptr;
    KG_CUDA_CHECK(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal));
    auto* seq = static_cast<unsigned*>(s_->flush_seq.get());
    if (opt_.flush_l2)
      launch_l2_flush(s_->flush.get(), s_->flush.size(), seq, s_->flush_blocks, stream());
    else
      launch_spin_kernel(0, 1, stream()); // a graph needs a node: a kernel that returns at once
    KG_CUDA_CHECK(cudaStreamEndCapture(stream(), &g));
    s_->prefix.adopt(g);
  }
  const bool want_cupti =
      opt_.backend == timing_backend::cupti || opt_.backend == timing_backend::automatic;
  if (opt_.trace_activity || want_cupti) {
    s_->tracer = activity_tracer::instance(&s_->tracer_why);
    if (opt_.backend == timing_backend::automatic)
      opt_.backend = s_->tracer ? timing_backend::cupti : timing_backend::events;
    if (!s_->tracer && opt_.backend == timing_backend::cupti)
      throw timing_error("timing backend 'cupti' unavailable: " + s_->tracer_why);
    if (s_->tracer && opt_.backend == timing_backend::cupti) {
      s_->tracer->acquire();
      s_->always_traced = true;
    }
  } else {
    s_->tracer_why = "not requested";
  }
  if (opt_.backend == timing_backend::automatic) opt_.backend = timing_backend::events;
  // Set up once per timer (a calibration kernel included): a GPU where counters cannot be read
  // fails here, before any sample, with the reason.
  if (opt_.backend == timing_backend::counters) s_->counters = std::make_unique<counter_profiler>();
}

gpu_timer::~gpu_timer() {
  if (s_->always_traced) s_->tracer->release();
}

cudaStream_t gpu_timer::stream() const {
  return s_->stream.get();
}

std::unique_ptr<gpu_timer::prepared> gpu_timer::prepare(const work_fn& work) {
  auto p = std::make_unique<prepared>();
  p->fn = work;
  // One plain call first: with lazy module loading (the CUDA default) a kernel's first launch
  // loads its module, which waits for the device to go idle -- inside the blocking window that
  // would wait for the blocking kernel, which waits for the host: a deadlock until its timeout.
  activity_tracer* tr = s_->tracer;
  const std::uint64_t tag = (++s_->next_tag) * 4;
  if (tr) {
    tr->acquire();
    tr->begin(tag);
  }
  work(stream());
  if (tr) tr->end();
  KG_CUDA_CHECK(cudaDeviceSynchronize());
  // Records of finished work can trail a flush by a moment: count until the count holds.
  auto settled_count = [tr](std::uint64_t t) {
    std::size_t n = tr->collect({t}).size();
    for (int i = 0; i < 5; ++i) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      const std::size_t m = tr->collect({t}).size();
      if (m == n) break;
      n = m;
    }
    return n;
  };
  const std::size_t direct = tr ? settled_count(tag) : 0;
  if (tr) tr->clear();
  if (opt_.backend == timing_backend::graph) {
    cudaGraph_t g = nullptr;
    KG_CUDA_CHECK(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal));
    work(stream());
    KG_CUDA_CHECK(cudaStreamEndCapture(stream(), &g));
    p->graph.adopt(g);
    p->use_graph = true;
    if (tr) {
      // A launch onto a stream the capture does not follow runs once, eagerly, and is missing
      // from every replay: such a call cannot be graph-timed.
      KG_CUDA_CHECK(cudaDeviceSynchronize());
      tr->clear();
      tr->begin(tag + 1);
      KG_CUDA_CHECK(cudaGraphLaunch(p->graph.get(), stream()));
      tr->end();
      KG_CUDA_CHECK(cudaDeviceSynchronize());
      const std::size_t replay = settled_count(tag + 1);
      tr->clear();
      if (replay < direct)
        throw timing_error("the CUDA graph captured " + std::to_string(replay) + " of the " +
                           std::to_string(direct) +
                           " GPU activities a direct call launches (work on a stream the capture "
                           "does not follow); time it with --backend events or cupti");
    }
  }
  if (tr) {
    tr->clear();
    tr->release();
  }
  return p;
}

timing_sample gpu_timer::take(prepared& work) {
  const cudaStream_t s = stream();
  // Events and graph samples are audited by CUPTI now and then (tracing slows every CUDA call
  // on the host); the cupti backend traces every sample.
  const std::uint64_t seen = s_->samples_seen++;
  // Graph replays are not audited: a replay runs only the captured work, ordered on the
  // measuring stream, and prepare() refuses a capture that dropped any of the call's work.
  const bool audit =
      s_->always_traced ||
      (s_->tracer &&
       (opt_.backend == timing_backend::events || opt_.backend == timing_backend::counters) &&
       (seen < 4 || opt_.audit_every <= 1 ||
        s_->audit_pick.below(static_cast<std::uint64_t>(opt_.audit_every)) == 0));
  activity_tracer* tr = audit ? s_->tracer : nullptr;
  if (tr && !s_->always_traced) tr->acquire();
  // Tags for this sample's holding kernel, work and trailing probe (CUPTI correlation).
  const std::uint64_t tag = (++s_->next_tag) * 4;
  const auto h0 = std::chrono::steady_clock::now();
  // Persisting lines exist only while a set-aside is configured (the work may configure one).
  std::size_t persisting = 0;
  KG_CUDA_CHECK(cudaDeviceGetLimit(&persisting, cudaLimitPersistingL2CacheSize));
  if (persisting > 0) KG_CUDA_CHECK(cudaCtxResetPersistingL2Cache());
  volatile int* flag = s_->flag.host();
  *flag = 0;
  auto* probes = s_->probes.device()->data();
  counter_profiler* counters = s_->counters.get();
  // The flush (new contents every sample: the blocking kernel advances its seed), untagged (its
  // records are never collected), then the blocking kernel launched on its own: with both in one
  // graph, the H200 flagged single-stream work as starting before the window opened (CUPTI's
  // times of graph-node kernels cannot bound the window).
  if (work.before) work.before(s); // staging: ahead of the flush, outside every window
  KG_CUDA_CHECK(cudaGraphLaunch(s_->prefix.get(), s));
  if (tr) tr->begin(tag + 1);
  // The counters backend does not hold the stream. Its samples are per-kernel durations measured
  // on the GPU around each kernel, so launch gaps never enter them and the hold buys nothing;
  // and the range profiler hooks every launch between begin() and end(), where it may wait for
  // the GPU (auto range serializes kernels) -- behind a held stream that wait would last until
  // the blocking kernel's timeout. A 10 us clock probe takes the blocking kernel's place as the
  // clock reading before the work (and as the audit's window opening); the flush seed advances
  // with it, as the blocking kernel would advance it.
  // An unheld sample opens its window the same way: the work then starts while the host is still
  // queueing it, as an untimed call would.
  const bool held = !counters && work.hold;
  if (!held)
    launch_clock_probe(&probes[0], 10'000, s, static_cast<unsigned*>(s_->flush_seq.get()));
  else
    launch_blocking_kernel(s_->flag.device(), opt_.blocking_timeout_ns, &probes[0], s,
                           static_cast<unsigned*>(s_->flush_seq.get()));
  KG_CUDA_CHECK(cudaEventRecord(s_->start.get(), s));
  if (tr) {
    tr->end();
    tr->begin(tag + 2);
  }
  if (counters) counters->begin(); // only the work's kernels are profiled
  const auto w0 = std::chrono::steady_clock::now();
  if (work.use_graph)
    KG_CUDA_CHECK(cudaGraphLaunch(work.graph.get(), s));
  else
    work.fn(s);
  const auto w1 = std::chrono::steady_clock::now();
  if (counters) counters->end();
  if (tr) {
    tr->end();
    tr->begin(tag + 3);
  }
  KG_CUDA_CHECK(cudaEventRecord(s_->stop.get(), s));
  launch_clock_probe(&probes[1], 10'000, s);
  if (tr) tr->end();
  if (work.after) work.after(s); // checking: behind the closing probe, outside every window
  const auto h1 = std::chrono::steady_clock::now();
  std::atomic_thread_fence(std::memory_order_release);
  *flag = 1;
  KG_CUDA_CHECK(cudaStreamSynchronize(s));
  const auto& p = *s_->probes.host();
  if (held && p[0].timed_out)
    throw timing_error("the blocking kernel timed out: the work synchronized with the host inside "
                       "the timed call, or queued more launches than the device queue holds");
  float ms = 0;
  KG_CUDA_CHECK(cudaEventElapsedTime(&ms, s_->start.get(), s_->stop.get()));
  timing_sample out;
  out.unheld = !held && !counters;
  out.event_us = 1000.0 * ms;
  out.gpu_us = out.event_us;
  if (counters) {
    // Kernels the work left on other streams are profiled too (the range profiler is per
    // context): they must finish before the counters are decoded.
    KG_CUDA_CHECK(cudaDeviceSynchronize());
    const auto ns = counters->collect();
    out.kernels = static_cast<int>(ns.size());
    out.gpu_us = counter_sample_us(ns);
  }
  if (tr) {
    // Work on another stream may still be running: the next sample must not overlap it.
    KG_CUDA_CHECK(cudaDeviceSynchronize());
    if (!s_->always_traced) tr->release();
    out.traced = true;
    out.trace_tag = tag;
  }
  const double before = probe_mhz(p[0]), after = probe_mhz(p[1]);
  out.sm_mhz = before > 0 && after > 0 ? std::min(before, after) : std::max(before, after);
  out.work_enqueue_us = std::chrono::duration<double, std::micro>(w1 - w0).count();
  out.host_us = std::chrono::duration<double, std::micro>(h1 - h0).count() - out.work_enqueue_us;
  return out;
}

timing_sample gpu_timer::sample(prepared& work) {
  timing_sample out = take(work);
  resolve(&out, &out + 1);
  return out;
}

std::vector<timing_sample> gpu_timer::sample_batch(const std::vector<prepared*>& works) {
  std::vector<timing_sample> out;
  out.reserve(works.size());
  for (prepared* w : works)
    out.push_back(take(*w));
  resolve(out.data(), out.data() + out.size());
  return out;
}

bool gpu_timer::clocks_settled(const std::vector<timing_sample>& recent, int n, double tol) {
  if (n < 2 || static_cast<int>(recent.size()) < n) return false;
  double lo = 0, hi = 0;
  for (auto it = recent.end() - n; it != recent.end(); ++it) {
    if (it->sm_mhz <= 0) return false; // no device clock: only the wall-time rule applies
    lo = lo == 0 ? it->sm_mhz : std::min(lo, it->sm_mhz);
    hi = std::max(hi, it->sm_mhz);
  }
  return hi - lo <= tol * hi;
}

void gpu_timer::resolve(timing_sample* first, timing_sample* last) {
  activity_tracer* tr = s_->tracer;
  if (!tr) return;
  std::vector<std::uint64_t> tags;
  int pending = 0;
  for (auto* s = first; s != last; ++s)
    if (s->trace_tag) {
      ++pending;
      for (std::uint64_t k = 1; k <= 3; ++k)
        tags.push_back(s->trace_tag + k);
    }
  if (!pending) return;
  auto acts = tr->collect(tags);
  auto probes_seen = [&] {
    int n = 0;
    for (const auto& a : acts)
      n += a.tag % 4 == 3 ? 1 : 0;
    return n;
  };
  // Records of finished kernels can trail the flush by a moment; ask again before judging.
  for (int retry = 0; retry < 20 && probes_seen() < pending; ++retry) {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    acts = tr->collect(tags);
  }
  tr->clear();
  std::map<std::uint64_t, std::vector<gpu_activity>> by_sample;
  for (const auto& a : acts)
    by_sample[a.tag - a.tag % 4].push_back(a);
  for (auto* s = first; s != last; ++s) {
    if (!s->trace_tag) continue;
    std::uint64_t open = 0, close = 0;
    std::uint32_t home = 0; // the holding kernel runs on the stream the work is given
    std::vector<gpu_activity> work_acts;
    for (const auto& a : by_sample[s->trace_tag]) {
      if (a.tag % 4 == 1) { // the blocking kernel: the window opens when it ends
        open = a.end_ns;
        home = a.stream_id;
      } else if (a.tag % 4 == 3) {
        close = a.start_ns;
      } else {
        work_acts.push_back(a);
      }
    }
    const auto span = summarize_activity(work_acts, open, close, home);
    s->activity_us = span.span_us;
    s->activity_streams = span.streams;
    s->off_home_stream = span.off_home ? span.off_home_stream : 0;
    s->untimed_activity = span.outside_window;
    s->untimed_stream = span.outside_stream;
    if (opt_.backend == timing_backend::cupti) s->gpu_us = span.span_us;
    s->trace_tag = 0;
  }
}

double gpu_timer::apply_clock_floor(std::vector<timing_sample>& samples, double floor) {
  std::map<long, int> bins;
  for (const auto& s : samples)
    if (s.sm_mhz > 0) ++bins[std::lround(s.sm_mhz / 15.0)];
  if (bins.empty()) return 0.0;
  const auto mode = std::max_element(bins.begin(), bins.end(), [](auto& a, auto& b) {
    return a.second < b.second || (a.second == b.second && a.first < b.first);
  });
  const double modal = 15.0 * static_cast<double>(mode->first);
  for (auto& s : samples)
    s.discarded = s.sm_mhz > 0 && s.sm_mhz < floor * modal;
  return modal;
}

std::string gpu_timer::stop_reason(const timing_options& opt, const std::vector<double>& kept,
                                   double gpu_seconds, double wall_seconds, int taken) {
  if (wall_seconds >= opt.max_wall_seconds) return "wall_cap";
  if (taken >= opt.max_samples) return "max_samples";
  const int n = static_cast<int>(kept.size());
  if (n < opt.min_samples || (gpu_seconds < opt.min_gpu_seconds && n < opt.enough_samples))
    return "";
  bootstrap_options b;
  b.resamples = 1000;
  b.method = ci_method::percentile;
  const auto ci = bootstrap_median(kept, b);
  const double half = 0.5 * (ci.hi - ci.lo);
  return ci.estimate > 0 && half / ci.estimate <= opt.target_rel_halfwidth ? "target_reached" : "";
}

std::string clock_variation_warning(const timing_result& r, double spread) {
  std::string msg;
  if (r.modal_mhz > 0 && (r.max_mhz - r.min_mhz) > spread * r.modal_mhz)
    msg = "SM clock varied " + std::to_string(std::lround(r.min_mhz)) + "-" +
          std::to_string(std::lround(r.max_mhz)) + " MHz (modal " +
          std::to_string(std::lround(r.modal_mhz)) + ")";
  for (const auto* c : {&r.nvml_before, &r.nvml_after})
    for (const auto& reason : c->throttle_reasons)
      if (reason != "GpuIdle" && msg.find(reason) == std::string::npos)
        msg += std::string(msg.empty() ? "" : "; ") + "NVML throttle reason " + reason;
  return msg;
}

timing_result gpu_timer::measure(const work_fn& work) {
  auto p = prepare(work);
  return run_loop([&](int) -> prepared& { return *p; }, nullptr);
}

timing_result gpu_timer::measure_honest(const honest_work& w, std::uint64_t seed) {
  if (w.slots < 1 || w.data_sets < 3)
    throw std::invalid_argument("honest timing needs a buffer set and three input sets");
  if (w.verify) {
    const auto v = w.verify(stream());
    if (!v.status.empty()) {
      timing_result bad;
      bad.backend = std::string(timing_backend_name(opt_.backend));
      bad.status = v.status;
      bad.status_reason = "before timing: " + v.reason;
      return bad;
    }
  }
  rng r(seed, stream_id("honest"));
  // The choice for the next call: which buffers, which contents, which fill, held or not.
  struct choice {
    int slot = 0, data = 0;
  } next;
  auto draw = [&](prepared& p, bool may_unhold) {
    next.data = static_cast<int>(r.below(static_cast<std::uint64_t>(w.data_sets)));
    p.hold = !(may_unhold && r.below(8) == 0);
  };
  // NaN bytes half the time, any other byte otherwise: whether the output looks poisoned tells a
  // kernel nothing.
  auto fill = [&]() -> unsigned char {
    return r.below(2) ? 0xff : static_cast<unsigned char>(r.below(256));
  };
  std::vector<std::unique_ptr<prepared>> slots;
  for (int k = 0; k < w.slots; ++k) {
    // prepare() makes one plain call: staged and checked like every other.
    const int data = static_cast<int>(r.below(static_cast<std::uint64_t>(w.data_sets)));
    w.stage(k, data, fill(), stream());
    slots.push_back(prepare([&w, k](cudaStream_t s) { w.launch(k, s); }));
    w.check(k, data, stream());
  }
  KG_CUDA_CHECK(cudaStreamSynchronize(stream()));
  int checks = w.slots;
  std::string hack;
  if (auto why = w.failed(); !why.empty()) hack = "a call before timing: " + why;
  for (auto& p : slots) {
    p->before = [&](cudaStream_t s) { w.stage(next.slot, next.data, fill(), s); };
    p->after = [&](cudaStream_t s) { w.check(next.slot, next.data, s); };
  }
  const int fresh_at = opt_.min_samples / 2 +
                       static_cast<int>(r.below(static_cast<std::uint64_t>(opt_.min_samples)));
  bool fresh_done = false;
  auto pick = [&](int taken) -> prepared& {
    const int slot = static_cast<int>(r.below(static_cast<std::uint64_t>(w.slots)));
    prepared& p = *slots[static_cast<std::size_t>(slot)];
    next.slot = slot;
    draw(p, taken >= 0);
    return p;
  };
  auto after = [&](int taken) -> bool {
    ++checks;
    if (auto why = w.failed(); !why.empty()) {
      hack = "timed call " + std::to_string(taken) + ": " + why;
      return false;
    }
    if (!fresh_done && taken + 1 >= fresh_at) {
      fresh_done = true; // the untimed call on inputs no timed call has seen
      ++checks;
      if (auto why = w.fresh(stream()); !why.empty()) {
        hack = "fresh inputs after timed call " + std::to_string(taken) + ": " + why;
        return false;
      }
    }
    return true;
  };
  timing_result res;
  if (hack.empty()) {
    res = run_loop(pick, after);
    // Warm-up calls are checked too; their flags are read with the first sample's.
    checks += res.warmup_samples;
  } else {
    res.backend = std::string(timing_backend_name(opt_.backend));
    res.stop_reason = "check_failed";
  }
  res.output_checks = checks;
  res.fresh_check_at = fresh_done ? fresh_at : -1;
  if (!hack.empty()) {
    res.status = "REWARD_HACK";
    res.status_reason = hack;
  }
  return res;
}

timing_result gpu_timer::run_loop(const std::function<prepared&(int)>& pick,
                                  const std::function<bool(int)>& after) {
  timing_result r;
  r.backend = std::string(timing_backend_name(opt_.backend));
  const nvml_session& nvml = s_->nvml;
  r.nvml_before = nvml.clocks(0);
  r.activity_audit = s_->tracer ? "cupti" : "unavailable: " + s_->tracer_why;
  // GPU work of the call outside the window the events bracket: no time for such a run.
  auto escaped = [&](const timing_sample& s, const std::string& where) {
    if (opt_.single_stream && s.traced && (s.activity_streams > 1 || s.off_home_stream != 0)) {
      r.stop_reason = "untimed_activity";
      r.status = "REWARD_HACK";
      r.status_reason = where + ": GPU work of the call ran on " +
                        (s.off_home_stream != 0 ? "stream " + std::to_string(s.off_home_stream) +
                                                      ", not the stream it was given"
                                                : std::to_string(s.activity_streams) + " streams") +
                        "; all of it must run on the given stream (work left on another stream "
                        "is not ordered before the caller's next use of the output)";
      return true;
    }
    // cupti spans and counters (the range profiler sees every stream) time such work.
    if (!s.untimed_activity || opt_.backend == timing_backend::cupti ||
        opt_.backend == timing_backend::counters)
      return false;
    r.stop_reason = "untimed_activity";
    r.status = "REWARD_HACK";
    r.status_reason = where + ": GPU work of the timed call ran outside the timed window (stream " +
                      std::to_string(s.untimed_stream) + "); " + r.backend +
                      " timing cannot see it (--backend cupti times it)";
    return true;
  };
  const auto w0 = std::chrono::steady_clock::now();
  // Warm-ups by count and by wall time: a GPU that was idle needs a moment under load before
  // its clocks settle where they will stay for the run.
  std::vector<timing_sample> warm;
  for (int i = 0;; ++i) {
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
    if (i >= opt_.warmup &&
        (t >= opt_.warmup_wall_seconds || i >= 100 * opt_.warmup || clocks_settled(warm)))
      break;
    warm.push_back(take(pick(-1 - i)));
    ++r.warmup_samples;
  }
  resolve(warm.data(), warm.data() + warm.size());
  for (std::size_t i = 0; i < warm.size(); ++i)
    if (escaped(warm[i], "warm-up sample " + std::to_string(i))) return r;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<double> kept;
  double modal = 0;
  std::size_t settled = 0; // samples [0, settled) have had their CUPTI records read and judged
  // Reads pending CUPTI records, judges the new samples; false when one escaped its timer.
  auto settle = [&] {
    resolve(r.samples.data() + settled, r.samples.data() + r.samples.size());
    for (; settled < r.samples.size(); ++settled) {
      const timing_sample& s = r.samples[settled];
      if (escaped(s, "sample " + std::to_string(settled))) return false;
      // Running judgement; the final one is made over the whole run below.
      if (!s.unheld && !(modal > 0 && s.sm_mhz > 0 && s.sm_mhz < opt_.clock_floor * modal)) {
        kept.push_back(s.gpu_us);
        r.gpu_seconds += s.gpu_us * 1e-6;
      }
    }
    return true;
  };
  for (int taken = 0;;) {
    timing_sample s = take(pick(taken));
    if (opt_.nvml_per_sample && nvml.available()) {
      const auto n = nvml.sample(0);
      s.nvml_sm_mhz = n.sm_mhz.value_or(0);
      s.throttle_mask = n.throttle_mask.value_or(0);
    }
    r.samples.push_back(s);
    if (after && !after(taken)) {
      r.stop_reason = "check_failed";
      break;
    }
    ++taken;
    if (taken % 16 == 1) modal = apply_clock_floor(r.samples, opt_.clock_floor);
    if (modal > 0 && s.sm_mhz > 0 && s.sm_mhz < opt_.clock_floor * modal)
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(opt_.backoff_ms));
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (stop_requested()) {
      r.stop_reason = "interrupted";
      break;
    }
    if (taken % 10 == 0 || taken >= opt_.max_samples || wall >= opt_.max_wall_seconds) {
      if (!settle()) break;
      r.stop_reason = stop_reason(opt_, kept, r.gpu_seconds, wall, taken);
      if (!r.stop_reason.empty()) break;
    }
  }
  if (r.status == "TIMED") (void)settle();
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.nvml_after = nvml.clocks(0);
  if (!r.samples.empty()) r.kernels_per_call = r.samples.front().kernels;
  r.modal_mhz = apply_clock_floor(r.samples, opt_.clock_floor);
  std::vector<double> host, host_traced;
  r.gpu_seconds = 0;
  for (const auto& s : r.samples) {
    (s.traced ? host_traced : host).push_back(s.host_us);
    r.traced_samples += s.traced ? 1 : 0;
    if (s.sm_mhz > 0) {
      r.min_mhz = r.min_mhz == 0 ? s.sm_mhz : std::min(r.min_mhz, s.sm_mhz);
      r.max_mhz = std::max(r.max_mhz, s.sm_mhz);
    }
    if (s.discarded || s.unheld) {
      ++r.discarded;
    } else {
      r.kept_us.push_back(s.gpu_us);
      r.gpu_seconds += s.gpu_us * 1e-6;
    }
  }
  // No time for a run that failed its checks or escaped its timer.
  if (r.stop_reason == "check_failed" || r.stop_reason == "untimed_activity") return r;
  if (r.kept_us.size() < 2) throw timing_error("fewer than two samples survived the clock floor");
  r.summary = summarize(r.kept_us);
  r.median_ci = bootstrap_median(r.kept_us);
  r.host_us_median = median(host.empty() ? host_traced : host);
  r.host_us_traced_median = host_traced.empty() ? 0.0 : median(host_traced);
  return r;
}

} // namespace kg
