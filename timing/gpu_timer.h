// The cold measurement loop. Per sample: overwrite a buffer of 2x the L2 size with a byte that
// changes every sample, reset persisting L2 lines, hold the stream with a blocking kernel until
// the start event, the work and the stop event are queued, then release. The SM clock is
// measured on the device around every sample (clock64 over %globaltimer), samples below a
// fraction of the run's modal clock are discarded, and the loop stops adaptively. Every raw
// sample is kept. (The counters backend queues the same sample without the hold: see take().)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <cuda_runtime_api.h>
#include <nlohmann/json.hpp>

#include "stats/bootstrap.h"
#include "stats/summary.h"
#include "gpu/cuda_raii.h"
#include "timing/honest_work.h"
#include "gpu/nvml.h"

namespace kg {

enum class timing_backend {
  automatic, // "auto": cupti where CUPTI can trace (no other profiler attached), else events
  events,    // cudaEventElapsedTime between events around the work on the measuring stream
  graph,     // the work captured once into a CUDA graph; each sample replays it between events
  cupti,     // CUPTI activity records: first start to last end of the call's GPU work, any stream
  counters,  // CUPTI range profiler: gpu__time_duration.sum of each kernel of the call (what ncu
             // reports as Duration), summed; kernels only, any stream; never picked by auto
};
std::string_view timing_backend_name(timing_backend b);
std::optional<timing_backend> parse_timing_backend(std::string_view s);

struct timing_options {
  // Default auto: across fresh processes the CUPTI span repeats better than event timing, which
  // also adds a launch gap to every kernel (docs/architecture.md, timing, and
  // docs/performance.md have the measurements).
  timing_backend backend = timing_backend::automatic;
  int warmup = 3;                     // at least this many warm-up samples ...
  double warmup_wall_seconds = 0.025; // ... and this much wall time (clocks settle under load),
                                      // unless the last 4 warm-ups' SM clocks already agree
                                      // within 0.5% (a GPU that was busy: no settling to wait
                                      // for; the clock floor still judges every sample)
  int min_samples = 30;
  int max_samples = 20000;
  // Of timed spans, kept samples only. A run's median moves less between processes the more
  // samples back it (docs/performance.md, The timing loop); the minimum is waived once
  // `enough_samples` are kept, so a 5 us kernel is not asked for 50,000.
  double min_gpu_seconds = 0.25;
  int enough_samples = 2000;
  double target_rel_halfwidth = 0.0025; // of the 95% interval of the median
  double max_wall_seconds = 10.0;
  double clock_floor = 0.90; // samples whose SM clock < floor x the run's modal clock are dropped
  double backoff_ms = 2.0;   // pause after a low-clock sample
  bool flush_l2 = true;
  std::uint64_t blocking_timeout_ns = 2'000'000'000ull;
  // Trace every sample with CUPTI where it works: GPU activity of the call outside the timed
  // window (a side stream the events cannot see) ends the run as REWARD_HACK.
  bool trace_activity = true;
  int audit_every = 8; // events / graph: the first 4 samples traced, then about 1 in audit_every
  // A traced sample whose GPU activity ran on more than one stream, or on a stream other than the
  // one it was given, ends the run as REWARD_HACK (kernelgate eval's candidate contract: kg_run's
  // work goes on the stream it is given).
  bool single_stream = false;
  bool nvml_per_sample = true; // read NVML's SM clock and throttle reasons after every sample
  nlohmann::json to_json() const;
};

struct timing_sample {
  double gpu_us = 0;        // the timed span, by the run's backend
  double event_us = 0;      // between the events around the work (recorded in every backend)
  double activity_us = -1;  // CUPTI: first start to last end of the call's activity (-1: untraced)
  int activity_streams = 0; // streams the call's GPU activity ran on
  std::uint32_t off_home_stream = 0; // a stream other than the given one it ran on (0: none)
  bool traced = false;               // CUPTI recorded this sample's GPU activity
  std::uint64_t trace_tag = 0;       // while its records are not yet read (internal)
  bool untimed_activity = false;     // some of the call's activity ran outside the timed window
  std::uint32_t untimed_stream = 0;
  double sm_mhz = 0;      // the lower of the clocks measured on the device before and after
  double nvml_sm_mhz = 0; // NVML's SM clock read after the sample (0: unavailable)
  unsigned long long throttle_mask = 0; // NVML throttle reasons read after the sample
  double host_us = 0;         // host time the harness spent enqueueing the sample, the work's own
                              // API calls excluded
  double work_enqueue_us = 0; // host time of the work's own API calls
  int kernels = -1;           // counters: kernels the range profiler saw (-1: not counted)
  bool discarded = false;
  bool unheld = false; // taken without the blocking kernel ahead (honest timing's disguise):
                       // launch overhead inside the span, so never kept as a time
};

struct timing_result {
  std::string backend;
  std::vector<timing_sample> samples; // every measured sample (warm-ups excluded)
  std::vector<double> kept_us;
  int discarded = 0;
  double modal_mhz = 0, min_mhz = 0, max_mhz = 0;
  sample_summary summary;         // of the kept samples
  bootstrap_interval median_ci{}; // BCa, 95%
  std::string stop_reason;        // target_reached | max_samples | wall_cap | interrupted |
                                  // check_failed | untimed_activity
  std::string activity_audit;     // "cupti", or "unavailable: <why>"
  int warmup_samples = 0;
  double wall_seconds = 0, gpu_seconds = 0;
  double host_us_median = 0;        // harness enqueue time of the untraced samples (all if none)
  double host_us_traced_median = 0; // the same for samples traced by CUPTI (0: none)
  int traced_samples = 0;
  nvml_clocks nvml_before, nvml_after;
  int kernels_per_call = -1; // counters: kernels of the call, as the first sample saw them
  // Honest-input accounting (measure_honest only).
  std::string status = "TIMED"; // TIMED | INCORRECT (wrong before timing) | REWARD_HACK
  std::string status_reason;
  int output_checks = 0;
  int fresh_check_at = -1; // sample index before which the untimed fresh-input call ran
  nlohmann::json to_json(bool with_samples = true) const;
};

// Raised when a sample cannot be taken honestly: the blocking kernel timed out (the work
// synchronized with the host inside the timed call, or queued more launches than the device
// queue holds) or the device reported an error.
struct timing_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using work_fn = std::function<void(cudaStream_t)>;

// `--clocks observe` warns instead of refusing: a message when the SM clock measured across the
// run's samples spread by more than `spread` of the modal clock, or when NVML reported a throttle
// reason other than GpuIdle before or after the run; "" when the clocks held steady.
std::string clock_variation_warning(const timing_result& r, double spread = 0.03);

class gpu_timer {
public:
  explicit gpu_timer(const timing_options& opt = {});
  ~gpu_timer();
  gpu_timer(const gpu_timer&) = delete;
  gpu_timer& operator=(const gpu_timer&) = delete;

  // A work item ready to be sampled (captured into a graph for the graph backend).
  struct prepared {
    work_fn fn;
    cuda_graph_exec graph;
    bool use_graph = false;
    // Untimed steps around every sample of this work: `before` is queued ahead of the L2 flush,
    // `after` behind the stop event and the closing clock probe (staging inputs, checking
    // outputs). `hold`: false takes the next sample without the blocking kernel (see unheld).
    work_fn before, after;
    bool hold = true;
  };
  std::unique_ptr<prepared> prepare(const work_fn& work);
  // One sample, complete (its CUPTI records read at once).
  timing_sample sample(prepared& work);
  // One sample of each, in order, their CUPTI records read together at the end: one forced CUPTI
  // flush (hundreds of microseconds of host time) per batch instead of one per sample.
  std::vector<timing_sample> sample_batch(const std::vector<prepared*>& works);
  // Whether the SM clocks measured on the device over the last `n` samples agree within `tol`
  // (relative): the warm-up's sign that the clocks have settled.
  static bool clocks_settled(const std::vector<timing_sample>& recent, int n = 4,
                             double tol = 0.005);
  // Warm-ups, then samples until the stopping rule holds; NVML clocks read before and after.
  timing_result measure(const work_fn& work);
  // The same loop over honest_work: every call staged (input contents and pointers rotated,
  // outputs filled) and checked on the device, about one call in eight taken without the
  // blocking kernel (checked, not kept), one untimed fresh-input call at a random point. A failed
  // check ends the run: status REWARD_HACK and no time. `seed` drives every choice.
  timing_result measure_honest(const honest_work& work, std::uint64_t seed = 0x686f6e6573ull);
  // The stopping rule on its own (testable without a GPU): enough samples and GPU time, and a
  // 95% median interval narrower than the target; returns the reason or "" to continue.
  static std::string stop_reason(const timing_options& opt, const std::vector<double>& kept_us,
                                 double gpu_seconds, double wall_seconds, int samples_taken);
  // Marks samples below floor x modal clock as discarded; returns the modal clock (MHz, 15 MHz
  // bins: the granularity of NVIDIA's clock steps).
  static double apply_clock_floor(std::vector<timing_sample>& samples, double floor);

  cudaStream_t stream() const;
  const timing_options& options() const { return opt_; }

private:
  // One sample whose CUPTI records, if traced, are read later by resolve(): a forced CUPTI
  // flush per sample costs hundreds of microseconds of host time in the calls that follow it.
  timing_sample take(prepared& work);
  // Reads the CUPTI records of every traced sample in [first, last) and fills in its activity
  // fields (and, for the cupti backend, its time).
  void resolve(timing_sample* first, timing_sample* last);
  // The adaptive loop: pick(i) gives the work for sample i (negative i: warm-ups); after(i), if
  // set, runs after sample i and returns false to end the run.
  timing_result run_loop(const std::function<prepared&(int)>& pick,
                         const std::function<bool(int)>& after);
  struct state;
  timing_options opt_;
  std::unique_ptr<state> s_;
};

} // namespace kg
