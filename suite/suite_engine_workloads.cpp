// The suites' step, serving and training workloads, on the set-up the session holds: the decode
// engine alone on the whole GPU, or on the green partition beside its tenant (idle, a bandwidth
// hog, 1/4/16 LoRA training jobs); LoRA training alone on the whole GPU.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "gpu/cuda_check.h"
#include "kernels/decode/decode_driver.h"
#include "stats/bootstrap.h"
#include "suite/suite_gpu_internal.h"
#include "timing/interrupt.h"
#include "workloads/arrivals.h"
#include "workloads/colocation.h"
#include "workloads/load_search.h"
#include "workloads/lora_model.h"
#include "workloads/lora_torch.h"
#include "workloads/qwen3.h"

namespace kg {
namespace {

int param(const suite_workload& w, const char* key) {
  return w.params.at(key).get<int>();
}

bool all_finite_bf16(const std::vector<std::uint16_t>& bits) {
  for (const auto x : bits) {
    const std::uint32_t u = static_cast<std::uint32_t>(x) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    if (!std::isfinite(f)) return false;
  }
  return true;
}

// Queues rows 0..batch-1 prefilled to `context`; returns the step's inputs.
struct step_inputs {
  std::vector<int> tokens, positions, slots;
};
step_inputs prefill_shape(decode_engine& e, int batch, int context) {
  step_inputs in;
  for (int b = 0; b < batch; ++b) {
    e.prefill(b, context);
    in.tokens.push_back(
        static_cast<int>((static_cast<std::int64_t>(b) * 7919 + 1) % e.config().model.vocab));
    in.positions.push_back(context);
    in.slots.push_back(b);
  }
  return in;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The tenant's training steps finished while `fn` ran (0 without a training tenant).
template <class F>
std::size_t training_steps_during(suite_gpu_session::impl& s, F&& fn) {
  const std::size_t before = s.training ? s.training->steps() : 0;
  fn();
  return s.training ? s.training->steps() - before : 0;
}

void note_setup(suite_gpu_session::impl& s, measured_workload& m) {
  m.extra["setup"] = s.group;
  if (s.partition)
    m.extra["partition"] = {{"decode_sms", s.partition->first_sms()},
                            {"tenant_sms", s.partition->rest_sms()}};
}

// Arrivals of a serving workload: its request mix and context band, 256 outputs.
arrival_options serving_arrivals(const suite_workload& w) {
  arrival_options a;
  a.seed = lora_seed;
  a.output_tokens = w.params.value("output_tokens", 256);
  const std::string mix = w.params.at("request_mix"), band = w.params.at("context_band");
  if (mix == "all1") {
    a.request_sizes = {1};
    a.size_weights = {1};
  } else if (mix == "all8") {
    a.request_sizes = {8};
    a.size_weights = {1};
  } else if (mix != "production") {
    throw std::invalid_argument("unknown request_mix '" + mix + "'");
  }
  if (band == "512-2048") {
    a.min_context = 512;
    a.max_context = 2048;
  } else if (band == "2048-8192") {
    a.min_context = 2048;
    a.max_context = 8192;
  } else if (band == "log512-8192") {
    a.min_context = 512;
    a.max_context = 8192;
  } else {
    throw std::invalid_argument("unknown context_band '" + band + "'");
  }
  return a;
}

// Sequences that arrived at least 1 s before the window closed (in it or in the warm-up) and had
// no first token by then: the load outran admission and prefill (the queue grows; ITL alone would
// not show it).
std::size_t starved_sequences(const batching_result& run, double window) {
  std::size_t n = 0;
  const double before = run.window_start_seconds + window - 1.0;
  for (const auto& q : run.sequences)
    n += q.arrival_seconds < before && q.token_seconds.empty();
  return n;
}

double rel_l2(const std::vector<double>& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < std::min(got.size(), ref.size()); ++i) {
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  if (got.size() != ref.size()) return INFINITY;
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// The training gates of one job's first step, as the seed gates a training step: loss within
// relative 1e-3, gradient and updated adapters within 1e-2 (relative L2 norm: a LoRA B starts at
// zero, so A's gradients start at zero and an element-wise ratio would divide by rounding noise)
// of a reference step from the same state -- the same job stepped by a bf16 trainer alone on the
// whole GPU, so the gates say whether batching jobs and co-location changed training. The
// precision of bf16 itself is checked against an fp32 step of the same state: loss within 1e-3,
// gradient within 5e-2, adapters within 1e-2 (H200: 2.6e-5, 0.031 and 0.0017 measured;
// docs/performance.md).
void training_gates(measured_workload& m, const background_training::first_step& got,
                    const lora_step_reference& ref, const lora_step_reference& fp32,
                    const std::string& which) {
  const double loss_rel = std::fabs(got.loss - ref.loss) / std::fabs(ref.loss);
  const double grad_rel = rel_l2(got.grad, ref.grad);
  const double param_rel = rel_l2(got.params_after, ref.params_after);
  std::ostringstream a, b, c;
  a << which << ": loss " << got.loss << " vs the bf16 reference step " << ref.loss << ": relative "
    << loss_rel << " (limit 1e-3)";
  b << which << ": gradient relative L2 " << grad_rel << ", adapters after the step " << param_rel
    << " vs the bf16 reference step (limit 1e-2)";
  m.gates.push_back({"loss_rel_1e-3_vs_reference", loss_rel <= 1e-3, a.str()});
  m.gates.push_back(
      {"params_grads_rel_1e-2_vs_reference", grad_rel <= 1e-2 && param_rel <= 1e-2, b.str()});
  const double f_loss = std::fabs(got.loss - fp32.loss) / std::fabs(fp32.loss);
  const double f_grad = rel_l2(got.grad, fp32.grad),
               f_param = rel_l2(got.params_after, fp32.params_after);
  c << which << ": vs the fp32 step: loss " << f_loss << " (limit 1e-3), gradient " << f_grad
    << " (limit 5e-2), adapters " << f_param << " (limit 1e-2)";
  m.gates.push_back(
      {"bf16_step_vs_fp32", f_loss <= 1e-3 && f_grad <= 5e-2 && f_param <= 1e-2, c.str()});
}

} // namespace

std::vector<std::uint16_t> logits_at_shape(decode_engine& e, int batch, int context) {
  const auto in = prefill_shape(e, batch, context);
  e.step(in.tokens, in.positions, in.slots);
  return e.logits_bits(batch);
}

lora_step_reference lora_reference_step(int job, const char* dtype) {
  const lora_config c;
  lora_trainer t(c, lora_seed, {make_lora_adapters(c, lora_seed, job)}, {"cuda", dtype});
  const auto r = t.step({make_lora_batch(c, lora_seed, job)}, lora_training_lr);
  return {r[0].loss, r[0].grad, t.adapters()[0].flat()};
}

measured_workload run_decode_step_workload(suite_gpu_session::impl& s, const suite_workload& w) {
  const int batch = param(w, "batch"), context = param(w, "context");
  const std::string placement = w.params.at("placement");
  auto& e = s.current_engine();
  const auto in = prefill_shape(e, batch, context);
  // Warm-up: the first step captures the graph; then 0.25 s of steps, so the clocks have left
  // whatever state the previous workload (or an idle GPU) put them in before a sample is taken.
  const auto warm = std::chrono::steady_clock::now();
  for (int i = 0; i < 3 || seconds_since(warm) < 0.25; ++i) {
    e.step(in.tokens, in.positions, in.slots);
    KG_CUDA_CHECK(cudaStreamSynchronize(e.stream()));
  }
  measured_workload m;
  // At least 40 samples and 0.5 s of them (per repeat): a run's median then moves less between
  // processes than the 3% minimum effect (docs/performance.md).
  const int min_samples = 40 * s.settings.repeats;
  const double min_seconds = 0.5 * s.settings.repeats;
  const auto during = training_steps_during(s, [&] {
    const auto t_all = std::chrono::steady_clock::now();
    while (static_cast<int>(m.samples.size()) < min_samples || seconds_since(t_all) < min_seconds) {
      throw_if_stop_requested();
      const auto t0 = std::chrono::steady_clock::now();
      e.step(in.tokens, in.positions, in.slots);
      KG_CUDA_CHECK(cudaStreamSynchronize(e.stream()));
      m.samples.push_back(seconds_since(t0));
    }
  });
  const auto logits = e.logits_bits(batch);
  const bool finite = all_finite_bf16(logits);
  m.gates.push_back({"logits_finite", finite, finite ? "all finite" : "a non-finite logit"});
  if (placement == "solo") {
    s.solo_logits.try_emplace({batch, context}, logits);
  } else {
    const auto it = s.solo_logits.find({batch, context});
    if (it == s.solo_logits.end())
      throw std::invalid_argument("no solo logits at batch " + std::to_string(batch) +
                                  ", context " + std::to_string(context));
    std::size_t diff = 0;
    for (std::size_t k = 0; k < std::min(logits.size(), it->second.size()); ++k)
      diff += logits[k] != it->second[k];
    const bool same = diff == 0 && logits.size() == it->second.size();
    m.gates.push_back(
        {"logits_bit_identical_to_solo", same,
         same ? "identical"
              : std::to_string(diff) + " of " + std::to_string(logits.size()) + " differ"});
  }
  const double gbps = s.copy_gbps();
  const double bytes = decode_step_roofline(batch, context).bytes;
  m.sol_bound = bytes / (gbps * 1e9);
  m.sol_detail = {{"bytes", bytes},
                  {"ceiling", "copy_bandwidth"},
                  {"ceiling_gbps", gbps},
                  {"note", "host clock per step: input copy, graph launch, synchronize"}};
  note_setup(s, m);
  if (s.training) m.extra["tenant_training_steps_during"] = during;
  return m;
}

measured_workload run_serving_workload(suite_gpu_session::impl& s, const suite_workload& w) {
  auto& e = s.current_engine();
  auto a = serving_arrivals(w);
  const double limit = w.params.value("itl_limit_ms", 50.0);
  // Seconds of arrivals per trace (the loop stops admitting then and the trace ends); the
  // repeats give the interval.
  const double trace_seconds = w.params.at("trace_seconds").get<double>();
  batching_options b;
  b.max_batch = e.config().max_batch;
  b.max_seconds = trace_seconds;
  b.prefill_chunk_tokens = w.params.at("prefill_chunk_tokens").get<std::int64_t>();
  a.duration_seconds = trace_seconds;
  const double size = mean_request_size(a);
  measured_workload m;
  note_setup(s, m);
  const int repeats = 3 * s.settings.repeats;
  decode_batching_stats stats; // the last trace's
  // Warm start: each trace's window follows a warm-up of simulated steps (the loop's
  // measure_from_seconds) that brings the batch to its steady size for the load, from a step cost
  // model: replayed from --warm-from's run when it has this workload, else measured under this
  // set-up's tenant (by the first trace of the set-up's first workload with this band's mean
  // context and this chunk).
  std::optional<step_cost_model> model;
  std::string model_source;
  double warm_up = 0;
  const std::int64_t model_context = std::llround(mean_context(a));
  auto trace = [&](double rps, std::uint64_t seed) {
    throw_if_stop_requested();
    if (!model) {
      if (const auto given = s.settings.warm_models.find(w.id);
          given != s.settings.warm_models.end()) {
        model = given->second;
        model_source = "replayed (--warm-from)";
      } else {
        const std::pair key{model_context, b.prefill_chunk_tokens};
        auto it = s.step_costs.find(key);
        if (it == s.step_costs.end())
          it = s.step_costs
                   .emplace(key, calibrate_step_cost(e, model_context, b.prefill_chunk_tokens))
                   .first;
        model = it->second;
        model_source = "calibrated";
      }
      warm_up = warm_up_seconds(*model, b.max_batch, b.prefill_chunk_tokens, a.output_tokens);
    }
    auto ak = a;
    ak.requests_per_second = rps;
    ak.seed = seed;
    auto bk = b;
    bk.measure_from_seconds = warm_up;
    bk.max_seconds = warm_up + trace_seconds;
    stats = {};
    return run_decode_batching(e, generate_warm_arrivals(ak, warm_up), bk, &stats, &*model);
  };
  double prefill_gpu = 0, decode_gpu = 0; // over every trace
  auto describe = [&](const batching_result& run) {
    prefill_gpu += stats.prefill_gpu_seconds;
    decode_gpu += stats.decode_gpu_seconds;
    const auto itl = run.itl_summary_ms();
    return nlohmann::json{{"p99_itl_ms", itl.p99_ms},
                          {"itl_ms",
                           {{"gaps", itl.gaps},
                            {"p50", itl.p50_ms},
                            {"p90", itl.p90_ms},
                            {"p99", itl.p99_ms},
                            {"max", itl.max_ms}}},
                          {"tokens_per_second", run.tokens_per_second()},
                          {"mean_batch", run.mean_batch()},
                          {"max_batch_seen", run.max_batch_seen},
                          {"prefill_tokens", run.prefill_tokens},
                          {"prefill_share_of_step_gpu_time", stats.prefill_share()},
                          {"kv_refusals", run.kv_refusals},
                          {"running_at_window_start", run.running_at_window_start},
                          {"waiting_at_window_start", run.waiting_at_window_start}};
  };
  nlohmann::json runs = nlohmann::json::array();
  std::size_t starved = 0, tenant_steps = 0, kv_refusals = 0;
  double rps = 0;
  if (w.kind == "serving_throughput") {
    nlohmann::json points = nlohmann::json::array();
    bracketed_search_options o;
    o.start_rps = 4.0 / size; // 4 sequences/s: well within the limit on any tenant
    o.limit_ms = limit;
    o.bisections = 2;
    o.max_steps = 8;
    o.saturation_loads = 2; // two doublings without 5% more tokens/s: saturated, stop
    bracketed_search_result r;
    auto measure = [&](double x, std::uint64_t seed, nlohmann::json& log) {
      const auto run = trace(x, seed);
      auto point = describe(run);
      point["offered_rps"] = x;
      log.push_back(point);
      return load_point{x, run.p99_itl_ms(), run.tokens_per_second()};
    };
    tenant_steps += training_steps_during(s, [&] {
      r = search_load_bracketed([&](double x) { return measure(x, a.seed, points); }, o);
    });
    m.extra["load_points"] = points;
    m.extra["search"] = {{"found", r.found},
                         {"crossed", r.crossed},
                         {"saturated", r.saturated},
                         {"limit_never_exceeded", r.limit_never_exceeded},
                         {"bracket_rps", {r.bracket_lo_rps, r.bracket_hi_rps}}};
    m.gates.push_back({"load_within_limit", r.found,
                       r.found ? "p99 " + std::to_string(r.best.p99_itl_ms) + " ms at " +
                                     std::to_string(r.best.offered_rps) + " requests/s"
                               : "no load met p99 ITL <= " + std::to_string(limit) + " ms"});
    if (!r.found)
      throw std::runtime_error("no load met p99 ITL <= " + std::to_string(limit) + " ms");
    rps = r.best.offered_rps;
    // One sample per arrival seed, the search's own first. Crossed: tokens/s where p99 reaches
    // the limit, interpolated between the bracket's loads (interpolate_limit says why); else
    // (saturated, or the limit never reached) tokens/s at the best load.
    const bool crossed = r.crossed;
    const auto hi_point = [&] {
      for (const auto& p : r.points)
        if (p.offered_rps == r.bracket_hi_rps) return p;
      return load_point{};
    }();
    auto sample = [&](std::uint64_t seed, const load_point& lo, const load_point* hi,
                      nlohmann::json rec) {
      rec["arrival_seed"] = seed;
      m.sample_keys.push_back(seed);
      if (!crossed) {
        m.samples.push_back(lo.tokens_per_second);
      } else {
        const auto c = interpolate_limit(lo, *hi, limit);
        m.samples.push_back(c.tokens_per_second);
        rec["at_limit"] = {{"fraction", c.fraction},
                           {"offered_rps", c.offered_rps},
                           {"tokens_per_second", c.tokens_per_second},
                           {"clamped", c.clamped}};
      }
      runs.push_back(std::move(rec));
    };
    sample(a.seed, r.best, crossed ? &hi_point : nullptr, nlohmann::json::object());
    tenant_steps += training_steps_during(s, [&] {
      for (const auto seed : repeat_arrival_seeds(a.seed, repeats - 1)) {
        nlohmann::json log = nlohmann::json::array();
        const auto lo = measure(rps, seed, log);
        if (!crossed) {
          sample(seed, lo, nullptr, {{"lo", log[0]}});
        } else {
          const auto hi = measure(r.bracket_hi_rps, seed, log);
          sample(seed, lo, &hi, {{"lo", log[0]}, {"hi", log[1]}});
        }
      }
    });
  } else {
    rps = w.params.at("offered_sequences_per_second").get<double>() / size;
    // The repeats: traces of other seeds at the fixed load. A trace without an inter-token
    // interval (no request arrived, or none decoded a second token in the window: all8 at 4
    // sequences/s is half a request a second) has no p99; it is skipped and the next seed taken,
    // up to 4 seeds a sample. The same seeds are skipped in every run (arrivals are seeded).
    nlohmann::json skipped = nlohmann::json::array();
    tenant_steps += training_steps_during(s, [&] {
      std::uint64_t seed = a.seed;
      for (int tried = 0; static_cast<int>(m.samples.size()) < repeats && tried < 4 * repeats;
           ++tried) {
        ++seed;
        const auto run = trace(rps, seed);
        kv_refusals += static_cast<std::size_t>(run.kv_refusals);
        if (!run.has_inter_token_interval()) {
          skipped.push_back(seed);
          continue;
        }
        m.samples.push_back(run.p99_itl_ms());
        m.sample_keys.push_back(seed);
        starved += starved_sequences(run, trace_seconds);
        auto r = describe(run);
        r["arrival_seed"] = seed;
        runs.push_back(r);
      }
    });
    m.extra["seeds_without_an_interval"] = skipped;
  }
  m.extra["offered_rps"] = rps;
  m.extra["offered_sequences_per_second"] = rps * size;
  m.extra["repeats"] = runs;
  m.extra["trace_seconds"] = trace_seconds;
  if (model) {
    auto warm = step_cost_model_json(*model);
    warm["kind"] = "simulated steps from a step cost model, then the window's steps on the GPU";
    warm["source"] = model_source;
    warm["warm_up_seconds"] = warm_up;
    warm["calibrated_context"] = model_context;
    m.extra["warm_start"] = std::move(warm);
  }
  m.extra["prefill"] = {
      {"kind", "chunked: the model over the prompts' tokens, at most prefill_chunk_tokens a step"},
      {"chunk_tokens", b.prefill_chunk_tokens},
      {"share_of_step_gpu_time",
       prefill_gpu + decode_gpu > 0 ? prefill_gpu / (prefill_gpu + decode_gpu) : 0.0}};
  m.extra["engine"] = {{"max_batch", e.config().max_batch},
                       {"kv_pool_tokens", e.config().kv_pool_tokens},
                       {"max_prefill_tokens", e.config().max_prefill_tokens}};
  if (s.training) m.extra["tenant_training_steps_during"] = tenant_steps;
  if (w.kind == "serving_p99") {
    // Waiting for prefill is the load's latency, not a failure: a request of 8 prompts of 8k
    // tokens needs more than a second of prefill on a partition. Counted, not gated.
    m.extra["sequences_without_first_token"] = starved;
    m.gates.push_back({"kv_admitted_all", kv_refusals == 0,
                       kv_refusals == 0
                           ? "the KV pool admitted every sequence on arrival"
                           : std::to_string(kv_refusals) + " admissions refused for KV space"});
  }
  return m;
}

measured_workload run_training_workload(suite_gpu_session::impl& s, const suite_workload& w) {
  const int jobs = param(w, "jobs");
  const std::string placement = w.params.at("placement");
  const lora_config c;
  measured_workload m;
  note_setup(s, m);
  m.extra["reference"] =
      "the same job's first step from the same state (base from the same float32 draws, the same "
      "adapters and batch) by a bf16 LibTorch trainer with that job alone on the whole GPU: the "
      "gates say whether N jobs together and co-location change training; an fp32 step of the "
      "same state checks bf16's precision (bf16_step_vs_fp32); the fp64 finite-difference "
      "reference checks the same trainer code on the small model (lora-train-small)";
  std::vector<double> losses;
  if (placement == "solo") {
    std::vector<lora_adapters> adapters;
    std::vector<lora_batch> batches;
    for (int j = 0; j < jobs; ++j) {
      adapters.push_back(make_lora_adapters(c, lora_seed, j));
      batches.push_back(make_lora_batch(c, lora_seed, j));
    }
    std::vector<lora_job_step> first;
    std::vector<lora_adapters> after;
    {
      lora_trainer t(c, lora_seed, adapters, {"cuda", "bfloat16"});
      first = t.step(batches, lora_training_lr);
      after = t.adapters();
      for (const auto& r : first)
        losses.push_back(r.loss);
      const int steps = 3 * s.settings.repeats;
      for (int i = 0; i < steps; ++i) {
        throw_if_stop_requested();
        const auto t0 = std::chrono::steady_clock::now();
        const auto r = t.step(batches, lora_training_lr); // reads the losses: finished
        m.samples.push_back(seconds_since(t0));
        for (const auto& x : r)
          losses.push_back(x.loss);
      }
    }
    release_torch_cuda_cache(); // the N-job trainer's blocks, before the references
    for (const int j : {0, jobs - 1}) {
      s.ensure_lora_references(j);
      training_gates(m, {first[j].loss, first[j].grad, after[j].flat()}, s.lora_reference_by_job[j],
                     s.lora_fp32_by_job[j], "job " + std::to_string(j));
      if (jobs == 1) break;
    }
  } else {
    if (!s.training || s.training_jobs != jobs)
      throw std::invalid_argument("beside_decode needs the engine.partition.lora" +
                                  std::to_string(jobs) + " set-up");
    // Decode serves the production mix at 10 sequences/s while the tenant's steps are timed:
    // traces until 3 steps (per repeat) have finished during them, at most 120 s.
    auto& e = s.current_engine();
    arrival_options a;
    a.seed = lora_seed;
    a.duration_seconds = 2.0;
    a.requests_per_second = 10.0 / mean_request_size(a);
    batching_options b;
    b.max_batch = e.config().max_batch;
    b.max_seconds = a.duration_seconds;
    b.prefill_chunk_tokens = suite_max_prefill_tokens; // real prefills, as the serving level's
    const std::size_t want = 3 * static_cast<std::size_t>(s.settings.repeats);
    const auto before = s.training->snapshot();
    const auto t0 = std::chrono::steady_clock::now();
    std::uint64_t seed = a.seed;
    // The first step that finishes may have started before the decode: skip it.
    while (s.training->steps() < before.seconds.size() + want + 1 && seconds_since(t0) < 120) {
      throw_if_stop_requested();
      a.seed = ++seed;
      run_decode_batching(e, generate_arrivals(a), b);
    }
    const auto after = s.training->snapshot();
    for (std::size_t i = before.seconds.size() + 1; i < after.seconds.size(); ++i)
      m.samples.push_back(after.seconds[i]);
    losses = after.losses;
    m.extra["decode_traces"] = seed - lora_seed;
    training_gates(m, s.training->first(), s.lora_reference_by_job.at(0), s.lora_fp32_by_job.at(0),
                   "job 0 (tenant)");
  }
  bool finite = !losses.empty();
  for (const double l : losses)
    finite = finite && std::isfinite(l);
  m.gates.push_back({"losses_finite", finite, std::to_string(losses.size()) + " losses"});
  if (!m.samples.empty()) {
    std::vector<double> sorted = m.samples;
    std::sort(sorted.begin(), sorted.end());
    m.extra["tokens_per_second"] =
        static_cast<double>(jobs) * static_cast<double>(c.seq) / sorted[sorted.size() / 2];
  }
  return m;
}

} // namespace kg
