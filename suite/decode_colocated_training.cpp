// decode-colocated-training (suite/decode_workload.h): the decode engine and LoRA training of
// Qwen3-4B in two green contexts. No LibTorch header here: the trainer is reached through
// workloads/lora_torch.h, which keeps LibTorch in its own TU.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "gpu/cuda_check.h"
#include "gpu/cuda_raii.h"
#include "gpu/green_partition.h"
#include "kernels/decode/decode_driver.h"
#include "kernels/decode/decode_engine.h"
#include "stats/bootstrap.h"
#include "suite/background_loop.h"
#include "suite/decode_workload.h"
#include "suite/tenants.h"
#include "workloads/arrivals.h"
#include "workloads/colocation.h"
#include "workloads/lora_model.h"
#include "workloads/lora_torch.h"

namespace kg {
namespace {

// The arrivals', the LoRA base's and adapters' seed: the other workloads' (decode-qwen3-4b's
// search sees the same first trace, lora-train-qwen3-4b trains the same model).
constexpr std::uint64_t seed = lora_seed;
constexpr double training_lr = lora_training_lr;

// One step at each shape: rows 0..batch-1 in slots 0..batch-1, each prefilled to `context` and
// decoding the token at that position (time_steps' tokens). The slots' later positions may hold
// an earlier shape's cache; a row attends positions 0..context only, all rewritten here.
std::vector<std::vector<std::uint16_t>> logits_at_shapes(decode_engine& e,
                                                         const std::vector<decode_shape>& shapes) {
  std::vector<std::vector<std::uint16_t>> out;
  for (const auto& s : shapes) {
    std::vector<int> tok, pos, slot;
    for (int b = 0; b < s.batch; ++b) {
      e.prefill(b, s.context);
      tok.push_back(
          static_cast<int>((static_cast<std::int64_t>(b) * 7919 + 1) % e.config().model.vocab));
      pos.push_back(s.context);
      slot.push_back(b);
    }
    e.step(tok, pos, slot);
    out.push_back(e.logits_bits(s.batch));
  }
  return out;
}

struct throughput_measurement {
  load_search_result search;
  nlohmann::json record = nlohmann::json::object();
  std::vector<double> tokens_per_second; // one per repeat
};

// The load search (as decode-qwen3-4b runs it), then `o.repeats` traces of other seeds at the
// load it found, each run as the search runs a load (admission stops at trace_seconds).
throughput_measurement measure_throughput(decode_engine& e, const decode_workload_options& o,
                                          const std::string& label) {
  arrival_options a;
  a.duration_seconds = o.trace_seconds;
  a.seed = seed;
  batching_options b;
  b.max_batch = e.config().max_batch;
  load_search_options ls;
  ls.start_rps = o.start_rps;
  ls.limit_ms = o.itl_limit_ms;
  ls.max_steps = o.max_load_steps;
  throughput_measurement m;
  nlohmann::json points = nlohmann::json::array();
  m.search = search_decode_load(e, a, b, ls, [&](const load_point& p, const batching_result& run) {
    const double mean_batch = run.mean_batch();
    points.push_back({{"offered_rps", p.offered_rps},
                      {"p99_itl_ms", p.p99_itl_ms},
                      {"tokens_per_second", p.tokens_per_second},
                      {"steps", run.steps},
                      {"mean_batch", mean_batch}});
    if (o.progress)
      *o.progress << "decode-colocated-training " << label << ": " << p.offered_rps
                  << " requests/s: p99 ITL " << p.p99_itl_ms << " ms, " << p.tokens_per_second
                  << " tokens/s, mean batch " << mean_batch << std::endl;
  });
  const auto& r = m.search;
  m.record["load_points"] = points;
  m.record["search"] = {{"p99_itl_limit_ms", o.itl_limit_ms},
                        {"found", r.found},
                        {"offered_rps", r.best.offered_rps},
                        {"p99_itl_ms", r.best.p99_itl_ms},
                        {"tokens_per_second", r.best.tokens_per_second},
                        {"limit_never_exceeded", r.limit_never_exceeded}};
  if (!r.found) return m;
  nlohmann::json repeats = nlohmann::json::array();
  int within = 0;
  for (const auto s : repeat_arrival_seeds(seed, o.repeats)) {
    auto ak = a;
    ak.seed = s;
    ak.requests_per_second = r.best.offered_rps;
    auto bk = b;
    bk.max_seconds = ak.duration_seconds;
    const auto run = run_decode_batching(e, generate_arrivals(ak), bk);
    const double tps = run.tokens_per_second(), p99 = run.p99_itl_ms();
    m.tokens_per_second.push_back(tps);
    within += p99 <= o.itl_limit_ms;
    repeats.push_back({{"arrival_seed", s},
                       {"tokens_per_second", tps},
                       {"p99_itl_ms", p99},
                       {"mean_batch", run.mean_batch()}});
    if (o.progress)
      *o.progress << "decode-colocated-training " << label << ": repeat (seed " << s << ") at "
                  << r.best.offered_rps << " requests/s: p99 ITL " << p99 << " ms, " << tps
                  << " tokens/s" << std::endl;
  }
  m.record["repeats"] = repeats;
  m.record["repeats_within_limit"] = within;
  if (m.tokens_per_second.size() >= 2)
    m.record["tokens_per_second"] = interval_json(bootstrap_mean(m.tokens_per_second));
  return m;
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

} // namespace

workload_result run_decode_colocated_training(const decode_workload_options& o) {
  if (o.repeats < 2) throw std::invalid_argument("decode-colocated-training: repeats >= 2");
  if (const auto why = torch_external_stream_unavailable(); !why.empty())
    throw std::runtime_error(why);
  int device = 0;
  KG_CUDA_CHECK(cudaGetDevice(&device));
  workload_result out;
  auto say = [&](const std::string& line) {
    if (o.progress) *o.progress << "decode-colocated-training: " << line << std::endl;
  };
  // First, so that a device without green contexts fails before minutes of solo measurement.
  nlohmann::json partition;
  const green_partition p = nearest_partition(&partition);
  out.metrics["partition"] = partition;
  say("partition " + std::to_string(p.first_sms()) + " decode + " + std::to_string(p.rest_sms()) +
      " training SMs of " + std::to_string(p.total_sms()));

  const auto shapes = colocated_bitwise_shapes();
  const decode_engine_config c; // Qwen3-4B, 32 slots of 8192 + 256 tokens: every shape fits
  // Solo: the engine alone on the whole GPU (freed before the training starts: both engines'
  // KV caches and the training's activations would not fit at once).
  std::vector<std::vector<std::uint16_t>> solo_logits;
  throughput_measurement solo;
  {
    cuda_stream whole;
    decode_engine e(c, whole.get());
    say("solo: logits at " + std::to_string(shapes.size()) + " shapes");
    solo_logits = logits_at_shapes(e, shapes);
    solo = measure_throughput(e, o, "solo");
  }

  // Co-located: training on its partition first (its first step done), then the engine on the
  // other partition, measured exactly as solo.
  std::vector<std::vector<std::uint16_t>> shared_logits;
  throughput_measurement shared;
  std::size_t steps_before = 0, steps_after = 0;
  background_training::result training;
  {
    background_training t(p.rest_stream(), device);
    say("training: waiting for its first step");
    t.wait_first_step();
    steps_before = t.steps();
    {
      decode_engine e(c, p.first_stream());
      say("co-located: logits at " + std::to_string(shapes.size()) + " shapes");
      shared_logits = logits_at_shapes(e, shapes);
      shared = measure_throughput(e, o, "co-located");
    }
    steps_after = t.steps();
    training = t.stop();
  }

  out.metrics["solo_whole_gpu"] = solo.record;
  out.metrics["colocated_with_training"] = shared.record;
  const bool fraction_known =
      solo.tokens_per_second.size() >= 2 && shared.tokens_per_second.size() >= 2;
  if (fraction_known) {
    const auto s = bootstrap_mean(solo.tokens_per_second),
               x = bootstrap_mean(shared.tokens_per_second);
    out.metrics["throughput_at_limit"] = {{"p99_itl_limit_ms", o.itl_limit_ms},
                                          {"repeats", o.repeats},
                                          {"solo_tokens_per_second", interval_json(s)},
                                          {"colocated_tokens_per_second", interval_json(x)}};
    // Resampling each configuration's repeats on its own: the two sets of traces ran apart.
    out.metrics["fraction_of_solo"] =
        interval_json(bootstrap_ratio_of_means(shared.tokens_per_second, solo.tokens_per_second));
    out.metrics["tokens_per_second"] = x.estimate;
  } else {
    out.metrics["fraction_of_solo"] = "n/a: a configuration found no load within the limit";
    out.metrics["tokens_per_second"] = 0.0;
  }
  out.metrics["sol_fraction"] = "n/a: see fraction_of_solo";
  nlohmann::json notes = nlohmann::json::array();
  for (const auto* m : {&solo, &shared})
    if (m->search.limit_never_exceeded)
      notes.push_back(
          std::string(m == &solo ? "solo" : "co-located") + ": the limit was never exceeded in " +
          std::to_string(o.max_load_steps) +
          " loads, so the found load is the last one tried: its repeats' mean_batch near " +
          std::to_string(c.max_batch) +
          " says it saturated the engine (then its tokens/s is the capacity at the limit); "
          "below that, tokens/s is the offered load's and --max-load-steps should grow");
  if (!notes.empty()) out.metrics["notes"] = notes;

  // Training: what it did beside the decode.
  const lora_config lc;
  nlohmann::json tr = {{"model", "Qwen3-4B LoRA rank 8 on q and v, sequence 2048, bfloat16, 1 job"},
                       {"learning_rate", training_lr},
                       {"steps", training.losses.size()},
                       {"steps_during_decode_measurements", steps_after - steps_before},
                       {"losses", training.losses}};
  if (training.seconds.size() >= 2) {
    const auto st = bootstrap_median(training.seconds);
    tr["step_seconds"] = interval_json(st);
    tr["tokens_per_second"] = static_cast<double>(lc.seq) / st.estimate;
  }

  // Gates. Logits: one per shape.
  bool finite = true;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const auto &a = solo_logits[i], &b = shared_logits[i];
    std::size_t diff = 0;
    for (std::size_t k = 0; k < std::min(a.size(), b.size()); ++k)
      diff += a[k] != b[k];
    const bool ok = diff == 0 && a.size() == b.size();
    finite = finite && all_finite_bf16(a);
    out.gates.push_back(
        {"logits bit-identical, co-located with training vs solo (batch " +
             std::to_string(shapes[i].batch) + ", context " + std::to_string(shapes[i].context) +
             ")",
         ok,
         ok ? "identical"
            : std::to_string(diff) + " of " + std::to_string(a.size()) + " logits differ"});
  }
  out.gates.push_back(
      {"solo logits finite at every shape", finite, finite ? "all finite" : "a non-finite logit"});
  for (const auto* m : {&solo, &shared}) {
    const auto& r = m->search;
    std::ostringstream d;
    if (r.found)
      d << r.best.tokens_per_second << " tokens/s at " << r.best.offered_rps
        << " requests/s, p99 ITL " << r.best.p99_itl_ms << " ms";
    else
      d << "no load from " << o.start_rps << " requests/s met p99 ITL <= " << o.itl_limit_ms
        << " ms";
    out.gates.push_back(
        {"a load meets p99 ITL <= " + std::to_string(static_cast<int>(o.itl_limit_ms)) + " ms (" +
             (m == &solo ? "solo" : "co-located with training") + ")",
         r.found, d.str()});
  }
  {
    bool ok = !training.losses.empty();
    for (const double l : training.losses)
      ok = ok && std::isfinite(l);
    out.gates.push_back({"training losses finite at every step", ok,
                         std::to_string(training.losses.size()) + " steps"});
    const auto during = steps_after - steps_before;
    out.gates.push_back({"training stepped while the decode was measured", during > 0,
                         std::to_string(during) + " steps finished during the co-located "
                                                  "logits, load search and repeats"});
  }
  // lora-train-qwen3-4b's gate, cheap here: one float32 step of the same model, adapters and
  // batch, on the whole GPU now that the engine and the bf16 trainer are gone.
  {
    say("training: float32 recomputation of the first loss");
    const double first = training.losses.front();
    tr["first_loss_bfloat16"] = first;
    std::ostringstream d;
    bool ok = false;
    try {
      lora_trainer f32(lc, seed, {make_lora_adapters(lc, seed, 0)}, {"cuda", "float32"});
      const double first_f32 = f32.step({make_lora_batch(lc, seed, 0)}, 0.0)[0].loss;
      const double rel = std::fabs(first - first_f32) / first_f32;
      tr["first_loss_float32"] = first_f32;
      ok = rel <= 2e-2;
      d << "bf16 " << first << " (on the training partition) vs float32 " << first_f32
        << " (whole GPU): relative " << rel << " (limit 0.02)";
    } catch (const std::exception& e) {
      // The decode results above stand; this gate fails with LibTorch's reason.
      d << "the float32 recomputation failed: " << e.what();
    }
    out.gates.push_back({"first training loss, bfloat16 vs float32", ok, d.str()});
  }
  out.metrics["training"] = tr;
  return out;
}

} // namespace kg
