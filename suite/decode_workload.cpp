#include "suite/decode_workload.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <sstream>

#include "stats/bootstrap.h"
#include "timing/cuda_check.h"
#include "timing/cuda_raii.h"
#include "timing/device_buffer.h"
#include "workloads/decode_driver.h"
#include "workloads/decode_engine.h"
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

decode_workload_output run_decode_qwen3_4b(const decode_workload_options& o) {
  decode_workload_output out;
  cuda_stream s;
  decode_engine_config c; // Qwen3-4B, 32 slots of 8192 + 256 tokens, random weights
  decode_engine e(c, s.get());
  out.metrics["gemv"] =
#ifdef KG_DECODE_GEMV_SIMPLE
      "launch_gemv_bf16_simple (gemv_bf16.cu absent from this build)";
#else
      "launch_gemv_bf16";
#endif

  // 1. Step latency at batch 1, context 2048 (the token at position 2048 attends 2049).
  const int context = 2048;
  e.prefill(0, context);
  const std::vector<int> tok = {1}, pos = {context}, slot = {0};
  e.step(tok, pos, slot, /*eager=*/true);
  const auto eager = e.logits_bits(1);
  for (int i = 0; i < 3; ++i) // capture, then warm up
    e.step(tok, pos, slot);
  const auto graph = e.logits_bits(1);
  std::vector<double> seconds;
  for (int i = 0; i < o.latency_samples; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    e.step(tok, pos, slot);
    KG_CUDA_CHECK(cudaStreamSynchronize(s.get()));
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const auto step = bootstrap_median(seconds);
  const double gbps = copy_gbps(s.get());
  const auto roof = decode_step_roofline(1, context, c.model);
  const double bound = roof.bytes / (gbps * 1e9);
  out.metrics["step_seconds"] = interval(step);
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
    bool same = eager == graph, finite = true;
    for (const auto x : graph) {
      const std::uint32_t u = static_cast<std::uint32_t>(x) << 16;
      float f;
      std::memcpy(&f, &u, sizeof f);
      finite = finite && std::isfinite(f);
    }
    out.gates.push_back({"graph replay logits bit-identical to eager launches (batch 1)", same,
                         same ? "identical" : "the CUDA graph's logits differ from eager's"});
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
  const auto r = search_decode_load(e, a, b, ls);
  nlohmann::json points = nlohmann::json::array();
  for (const auto& p : r.points)
    points.push_back({{"offered_rps", p.offered_rps},
                      {"p99_itl_ms", p.p99_itl_ms},
                      {"tokens_per_second", p.tokens_per_second}});
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
    d << " (the limit was never exceeded in " << o.max_load_steps << " loads: raise --start-rps)";
  out.gates.push_back(
      {"a load meets p99 ITL <= " + std::to_string(static_cast<int>(o.itl_limit_ms)) + " ms",
       r.found, d.str()});
  return out;
}

} // namespace kg
