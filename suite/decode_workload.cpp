#include "suite/decode_workload.h"
#include "suite/tenants.h"
#include "timing/interrupt.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "gpu/cuda_check.h"
#include "gpu/cuda_raii.h"
#include "gpu/device_buffer.h"
#include "gpu/green_partition.h"
#include "kernels/decode/decode_driver.h"
#include "kernels/decode/decode_engine.h"
#include "kernels/hogs.h"
#include "stats/bootstrap.h"
#include "workloads/arrivals.h"
#include "workloads/qwen3.h"

namespace kg {
namespace {

// Device-to-device copy bandwidth, (read + write) bytes / median time of a 1 GiB
// cudaMemcpyAsync, as bench/decode_kernels.cpp measures its ceiling (there with an L2 flush; 1
// GiB is 20x the H200's L2, so none is needed here).
double copy_gbps(cudaStream_t s) {
  const std::size_t bytes = std::size_t{1} << 30;
  device_buffer src(bytes), dst(bytes);
  KG_CUDA_CHECK(cudaMemsetAsync(src.get(), 1, bytes, s));
  cuda_event a, b;
  std::vector<double> ms;
  for (int i = 0; i < 12; ++i) {
    KG_CUDA_CHECK(cudaEventRecord(a.get(), s));
    KG_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, s));
    KG_CUDA_CHECK(cudaEventRecord(b.get(), s));
    KG_CUDA_CHECK(cudaEventSynchronize(b.get()));
    float t = 0;
    KG_CUDA_CHECK(cudaEventElapsedTime(&t, a.get(), b.get()));
    if (i >= 2) ms.push_back(t); // the first two warm up
  }
  std::sort(ms.begin(), ms.end());
  const double median = 0.5 * (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]);
  return 2.0 * static_cast<double>(bytes) / (median * 1e-3) / 1e9;
}

nlohmann::json interval(const bootstrap_interval& b) {
  return {{"estimate", b.estimate}, {"ci95", {b.lo, b.hi}}};
}

} // namespace

workload_result run_decode_qwen3_4b(const decode_workload_options& o) {
  workload_result out;
  cuda_stream s;
  decode_engine_config c; // Qwen3-4B, 32 slots of 8192 + 256 tokens, random weights
  decode_engine e(c, s.get());
  out.metrics["gemv"] = "launch_gemv_bf16 (pick_gemv_config_in_step)";

  // 1. Step latency at batch 1, context 2048 (the token at position 2048 attends 2049), with the
  // engine's programmatic launches and with plain ones, sample by sample in turn: the ratio of
  // the two is measured side by side.
  const int context = 2048;
  e.prefill(0, context);
  const std::vector<int> tok = {1}, pos = {context}, slot = {0};
  e.set_programmatic_launch(false);
  e.step(tok, pos, slot, /*eager=*/true);
  const auto eager = e.logits_bits(1);
  std::vector<std::uint16_t> graph[2]; // [programmatic]
  for (const bool pl : {false, true}) {
    e.set_programmatic_launch(pl);
    for (int i = 0; i < 3; ++i) // capture, then warm up
      e.step(tok, pos, slot);
    graph[pl] = e.logits_bits(1);
  }
  std::vector<double> seconds[2];
  for (int i = 0; i < o.latency_samples; ++i)
    for (const bool pl : {true, false}) {
      throw_if_stop_requested();
      e.set_programmatic_launch(pl);
      const auto t0 = std::chrono::steady_clock::now();
      e.step(tok, pos, slot);
      KG_CUDA_CHECK(cudaStreamSynchronize(s.get()));
      seconds[pl].push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  e.set_programmatic_launch(c.programmatic_launch); // the batching below: the engine's default
  const auto step = bootstrap_median(seconds[c.programmatic_launch]);
  const auto step_other = bootstrap_median(seconds[!c.programmatic_launch]);
  const double gbps = copy_gbps(s.get());
  const auto roof = decode_step_roofline(1, context, c.model);
  const double bound = roof.bytes / (gbps * 1e9);
  out.metrics["step_seconds"] = interval(step);
  out.metrics["step_launches"] = c.programmatic_launch ? "programmatic" : "plain";
  out.metrics[c.programmatic_launch ? "step_seconds_plain_launches"
                                    : "step_seconds_programmatic_launches"] = interval(step_other);
  out.metrics["step_plain_over_programmatic"] =
      (c.programmatic_launch ? step_other.estimate / step.estimate
                             : step.estimate / step_other.estimate);
  out.metrics["step_batch"] = 1;
  out.metrics["step_context"] = context;
  out.metrics["step_bytes_min"] = roof.bytes;
  out.metrics["copy_gbps"] = gbps;
  out.metrics["bound_seconds"] = bound;
  out.metrics["sol_fraction"] = bound / step.estimate;
  out.metrics["sol_fraction_note"] =
      "bytes/bandwidth bound (decode_step_roofline at batch 1, context 2048, over the measured "
      "1 GiB device copy bandwidth) / median step seconds (host clock: input copy, graph launch, "
      "synchronize)";
  {
    const bool same = eager == graph[0] && eager == graph[1];
    bool finite = true;
    for (const auto x : graph[1]) {
      const std::uint32_t u = static_cast<std::uint32_t>(x) << 16;
      float f;
      std::memcpy(&f, &u, sizeof f);
      finite = finite && std::isfinite(f);
    }
    out.gates.push_back(
        {"graph replay logits bit-identical to eager launches, plain and programmatic (batch 1)",
         same,
         same ? "identical"
              : std::string("differ: graph with plain launches ") +
                    (eager == graph[0] ? "matches" : "differs from") +
                    " eager, graph with programmatic launches " +
                    (eager == graph[1] ? "matches" : "differs from") + " eager"});
    out.gates.push_back(
        {"logits finite after 36 layers", finite, finite ? "all finite" : "a non-finite logit"});
  }

  // 2. Continuous batching: throughput at p99 ITL <= limit.
  arrival_options a;
  a.duration_seconds = o.trace_seconds;
  a.seed = 20261129;
  batching_options b;
  b.max_batch = c.max_batch;
  load_search_options ls;
  ls.start_rps = o.start_rps;
  ls.limit_ms = o.itl_limit_ms;
  ls.max_steps = o.max_load_steps;
  nlohmann::json points = nlohmann::json::array();
  const auto r =
      search_decode_load(e, a, b, ls, [&](const load_point& p, const batching_result& run) {
        const double mean_batch = run.mean_batch(); // near max_batch: past saturation
        points.push_back({{"offered_rps", p.offered_rps},
                          {"p99_itl_ms", p.p99_itl_ms},
                          {"tokens_per_second", p.tokens_per_second},
                          {"steps", run.steps},
                          {"mean_batch", mean_batch},
                          {"max_batch_seen", run.max_batch_seen}});
        if (o.progress)
          *o.progress << "decode-qwen3-4b: " << p.offered_rps << " requests/s: p99 ITL "
                      << p.p99_itl_ms << " ms, " << p.tokens_per_second << " tokens/s, mean batch "
                      << mean_batch << std::endl;
      });
  out.metrics["load_points"] = points;
  out.metrics["tokens_per_second"] = r.found ? r.best.tokens_per_second : 0.0;
  out.metrics["throughput_at_limit"] = {{"p99_itl_limit_ms", o.itl_limit_ms},
                                        {"found", r.found},
                                        {"offered_rps", r.best.offered_rps},
                                        {"p99_itl_ms", r.best.p99_itl_ms},
                                        {"tokens_per_second", r.best.tokens_per_second},
                                        {"limit_never_exceeded", r.limit_never_exceeded}};
  out.metrics["batching_note"] =
      "prefill is the engine's synthetic KV fill (its cost: writing the cache, a lower bound on "
      "a real prefill); every sequence 256 output tokens, contexts 512..8192 log-uniform";
  std::ostringstream d;
  if (r.found)
    d << r.best.tokens_per_second << " tokens/s at " << r.best.offered_rps
      << " requests/s, p99 ITL " << r.best.p99_itl_ms << " ms";
  else
    d << "no load from " << o.start_rps << " requests/s met p99 ITL <= " << o.itl_limit_ms << " ms";
  if (r.limit_never_exceeded)
    d << " (the limit was never exceeded in " << o.max_load_steps
      << " loads: with the batch capped at " << c.max_batch
      << " a step's time bounds the ITL; load_points' mean_batch says whether the last load "
         "saturated it)";
  out.gates.push_back(
      {"a load meets p99 ITL <= " + std::to_string(static_cast<int>(o.itl_limit_ms)) + " ms",
       r.found, d.str()});
  return out;
}

} // namespace kg

namespace kg {
namespace {

// Host-clock seconds of `samples` steps of one fixed batch (each step re-writes the same
// positions, so every sample does the same work), after three warm-up steps (the first
// captures the graph). The logits of the last step come back in *logits.
std::vector<double> time_steps(decode_engine& e, const std::vector<int>& contexts, int samples,
                               std::vector<std::uint16_t>* logits) {
  std::vector<int> tok, pos, slot;
  for (std::size_t b = 0; b < contexts.size(); ++b) {
    e.prefill(static_cast<int>(b), contexts[b]);
    tok.push_back(
        static_cast<int>((b * 7919 + 1) % static_cast<std::size_t>(e.config().model.vocab)));
    pos.push_back(contexts[b]);
    slot.push_back(static_cast<int>(b));
  }
  for (int i = 0; i < 3; ++i)
    e.step(tok, pos, slot);
  KG_CUDA_CHECK(cudaStreamSynchronize(e.stream()));
  std::vector<double> seconds;
  for (int i = 0; i < samples; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    e.step(tok, pos, slot);
    KG_CUDA_CHECK(cudaStreamSynchronize(e.stream()));
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  *logits = e.logits_bits(static_cast<int>(contexts.size()));
  return seconds;
}

struct tenant_result {
  std::vector<double> b1_seconds, b32_seconds; // every timed step
  bootstrap_interval b1, b32;
  std::vector<std::uint16_t> logits_b1, logits_b32;
};

tenant_result measure_tenant(cudaStream_t s, const std::vector<int>& b32_contexts, int samples) {
  decode_engine_config c;
  c.max_context = 8192 + 1; // the longest drawn context and its one decoded token
  decode_engine e(c, s);
  tenant_result r;
  r.b1_seconds = time_steps(e, {2048}, samples, &r.logits_b1);
  r.b32_seconds = time_steps(e, b32_contexts, samples, &r.logits_b32);
  r.b1 = bootstrap_median(r.b1_seconds);
  r.b32 = bootstrap_median(r.b32_seconds);
  return r;
}

} // namespace

workload_result run_decode_colocated(const decode_workload_options& o) {
  std::string why;
  auto p = green_partition::create(0, 99, &why);
  if (!p) throw std::runtime_error("no green partition: " + why);
  int khz = 0;
  KG_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
  // 32 contexts drawn as the arrivals draw them (log-uniform 512..8192), fixed by the seed.
  std::vector<int> contexts;
  {
    arrival_options a;
    a.requests_per_second = 50;
    a.duration_seconds = 10;
    a.seed = 20261129;
    for (const auto& q : generate_arrivals(a))
      for (const auto ctx : q.contexts)
        if (contexts.size() < 32) contexts.push_back(static_cast<int>(ctx));
  }
  const int samples = std::max(10, o.latency_samples);
  cuda_stream whole;
  const auto solo = measure_tenant(whole.get(), contexts, samples);
  const auto alone = measure_tenant(p->first_stream(), contexts, samples);
  tenant_result shared;
  double hog_bytes = 0;
  {
    background_hog hog(p->rest_stream(), static_cast<int>(p->rest_sms()), khz / 1000.0);
    shared = measure_tenant(p->first_stream(), contexts, samples);
    hog_bytes = hog.stop();
  }
  workload_result out;
  const double b32_tokens = static_cast<double>(contexts.size());
  out.metrics["partition"] = {
      {"decode_sms", p->first_sms()}, {"hog_sms", p->rest_sms()}, {"total_sms", p->total_sms()}};
  out.metrics["step_seconds"] = interval(shared.b1);
  out.metrics["tokens_per_second"] = b32_tokens / shared.b32.estimate;
  out.metrics["sol_fraction"] = "n/a: see fraction_of_solo";
  out.metrics["batch1_ctx2048_step_seconds"] = {{"solo_whole_gpu", interval(solo.b1)},
                                                {"partition_alone", interval(alone.b1)},
                                                {"partition_with_hog", interval(shared.b1)}};
  out.metrics["batch32_tokens_per_second"] = {
      {"solo_whole_gpu", b32_tokens / solo.b32.estimate},
      {"partition_alone", b32_tokens / alone.b32.estimate},
      {"partition_with_hog", b32_tokens / shared.b32.estimate}};
  out.metrics["batch32_contexts"] = contexts;
  // Throughput fraction = solo step time / co-located step time: the ratio of the two medians,
  // with a bootstrap interval resampling each tenant's steps on its own (independent runs).
  out.metrics["fraction_of_solo"] = {
      {"batch1_throughput",
       interval(bootstrap_ratio_of_medians(solo.b1_seconds, shared.b1_seconds))},
      {"batch32_throughput",
       interval(bootstrap_ratio_of_medians(solo.b32_seconds, shared.b32_seconds))},
      {"batch32_throughput_vs_partition_alone",
       interval(bootstrap_ratio_of_medians(alone.b32_seconds, shared.b32_seconds))}};
  out.metrics["hog_bytes_per_50ms_launch"] = hog_bytes;
  auto same = [&](const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b,
                  const std::string& what) {
    std::size_t diff = 0;
    for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
      diff += a[i] != b[i];
    const bool ok = diff == 0 && a.size() == b.size();
    out.gates.push_back(
        {"logits bit-identical, co-located vs solo (" + what + ")", ok,
         ok ? "identical"
            : std::to_string(diff) + " of " + std::to_string(a.size()) + " logits differ"});
  };
  same(solo.logits_b1, shared.logits_b1, "batch 1");
  same(solo.logits_b32, shared.logits_b32, "batch 32");
  out.gates.push_back({"the hog moved memory beside the decode", hog_bytes > 0,
                       std::to_string(hog_bytes) + " bytes per launch"});
  return out;
}

} // namespace kg
