#include "suite/suite_gpu.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "gpu/cuda_check.h"
#include "kernels/decode/decode_driver.h"
#include "kernels/task_torch_refs.h"
#include "suite/role_sources.h"
#include "suite/suite_gpu_internal.h"
#include "timing/clock_watch.h"
#include "timing/copy_bandwidth.h"
#include "workloads/arrivals.h"
#include "workloads/continuous_batching.h"
#include "workloads/lora_torch.h"

namespace kg {

double suite_gpu_session::impl::copy_gbps() {
  if (!copy_gbps_value) {
    // 1 GiB, 20x the H200's L2: the device's copy ceiling, as the decode benchmarks measure it.
    copy_gbps_value = measure_copy_bandwidth(std::size_t{1} << 30).gbps;
    log("copy bandwidth ceiling: " + std::to_string(*copy_gbps_value) + " GB/s");
  }
  return *copy_gbps_value;
}

gpu_timer& suite_gpu_session::impl::kernel_timer() {
  if (!timer) {
    timing_options o;
    // Suite kernels are ours, not a candidate's: no activity audit per sample is needed, and a
    // suite of 62 kernels must stay within a minute. 0.6 s of wall time per repeat at most;
    // the 95% interval of the median is then well inside the 3% minimum effect.
    o.max_wall_seconds = 0.6 * settings.repeats;
    o.min_gpu_seconds = 0.02;
    o.enough_samples = 400 * settings.repeats;
    o.min_samples = 30;
    timer = std::make_unique<gpu_timer>(o);
  }
  return *timer;
}

void suite_gpu_session::impl::log(const std::string& line) const {
  if (settings.log) *settings.log << "kernelgate run: " << line << std::endl;
}

void suite_gpu_session::impl::leave_group() {
  // The kernel timer keeps CUPTI's activity tracing on while it lives: off before any engine or
  // training runs, whose thousands of kernels it would trace (and slow).
  timer.reset();
  step_costs.clear(); // measured on this set-up
  engine.reset();     // before the partition whose stream it uses
  if (hog) {
    hog->stop();
    hog.reset();
  }
  if (training) {
    training->stop();
    training.reset();
  }
  training_jobs = 0;
  partition.reset();
  release_torch_cuda_cache();
  whole_stream.reset();
  group.clear();
}

namespace {

// The session's overrides, in an engine's graphs.
void install_overrides(const suite_gpu_session::impl& s, decode_engine& e) {
  for (const auto& o : s.settings.overrides)
    e.set_gemv_override(o.projection, [o](const __nv_bfloat16* x, const __nv_bfloat16* w,
                                          __nv_bfloat16* y, int b, int n, int k, cudaStream_t st) {
      return o.launch(x, w, y, b, n, k, st);
    });
}

// The solo logits of every step shape the suites use, from an engine alone on the whole GPU,
// made before a partition's tenant starts (both engines' KV caches would not fit beside it).
void fill_solo_logits(suite_gpu_session::impl& s) {
  if (s.solo_logits.size() >= 12) return;
  s.log("solo logits at 12 shapes (the co-located gate's reference)");
  cuda_stream st;
  decode_engine e(decode_engine_config{}, st.get());
  install_overrides(s, e);
  for (const int b : {1, 4, 8, 32})
    for (const int c : {512, 2048, 8192})
      if (!s.solo_logits.count({b, c})) s.solo_logits[{b, c}] = logits_at_shape(e, b, c);
}

} // namespace

namespace {

// The engine of the engine.* set-ups: the serving engine (decode_engine_plan.h), its KV pool what
// the device's free memory holds now -- beside the tenant, started first -- less a reserve for
// the run's own buffers (the copy-bandwidth probe's 2 GiB among them).
decode_engine_config suite_engine_config() {
  std::size_t free = 0, total = 0;
  KG_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return serving_engine_config(static_cast<std::int64_t>(free), std::int64_t{6} << 30, 256,
                               suite_max_prefill_tokens);
}

// One untimed second of serving on a new engine, before any workload measures it: the first
// launch of each graph uploads it, the first prefill GEMM of each row count picks its cuBLAS
// algorithm and the first launch of a kernel loads its module: without it the set-up's first
// serving workload pays those costs inside its timed steps, and a varying amount of them.
void warm_up_serving(decode_engine& e) {
  arrival_options a;
  a.requests_per_second = 16; // ~40 sequences/s of the production mix: batches into the dozens
  a.duration_seconds = 1.0;
  a.seed = 20261201;
  batching_options b;
  b.max_batch = e.config().max_batch;
  b.max_seconds = a.duration_seconds;
  b.prefill_chunk_tokens = e.config().max_prefill_tokens; // every chunk size the suites use
  (void)run_decode_batching(e, generate_arrivals(a), b, nullptr);
  KG_CUDA_CHECK(cudaStreamSynchronize(e.stream()));
}

} // namespace

void suite_gpu_session::impl::enter_group(const std::string& name) {
  if (name == group) return;
  leave_group();
  const auto t0 = std::chrono::steady_clock::now();
  log("set-up " + name);
  if (name == "engine.whole") {
    whole_stream = std::make_unique<cuda_stream>();
    engine = std::make_unique<decode_engine>(suite_engine_config(), whole_stream->get());
    install_overrides(*this, *engine);
    warm_up_serving(*engine);
  } else if (name.rfind("engine.partition.", 0) == 0) {
    const std::string tenant = name.substr(std::string("engine.partition.").size());
    fill_solo_logits(*this);
    int device = 0;
    KG_CUDA_CHECK(cudaGetDevice(&device));
    if (tenant.rfind("lora", 0) == 0) {
      training_jobs = std::stoi(tenant.substr(4));
      if (const auto why = torch_external_stream_unavailable(); !why.empty())
        throw std::runtime_error(why);
      // The gates' reference from the jobs' initial state, on the whole GPU before the tenant.
      ensure_lora_references(0); // the tenant's job 0 is gated against them
    }
    partition.emplace(nearest_partition(&partition_record));
    if (tenant == "hog") {
      int khz = 0;
      KG_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device));
      hog = std::make_unique<background_hog>(partition->rest_stream(),
                                             static_cast<int>(partition->rest_sms()), khz / 1e3);
    } else if (training_jobs > 0) {
      training =
          std::make_unique<background_training>(partition->rest_stream(), device, training_jobs);
      training->wait_first_step();
    } else if (tenant != "idle") {
      throw std::invalid_argument("unknown set-up " + name);
    }
    engine = std::make_unique<decode_engine>(suite_engine_config(), partition->first_stream());
    install_overrides(*this, *engine);
    warm_up_serving(*engine);
  } else if (name != "kernels" && name != "training.whole") {
    throw std::invalid_argument("unknown set-up " + name);
  }
  group = name;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json rec = {{"setup", name}, {"seconds", seconds}};
  if (partition) rec["partition"] = partition_record;
  setups.push_back(rec);
}

void suite_gpu_session::impl::ensure_lora_references(int job) {
  if (!lora_reference_by_job.count(job))
    lora_reference_by_job[job] = lora_reference_step(job, "bfloat16");
  release_torch_cuda_cache(); // each model's blocks back before the next set-up needs them
  if (!lora_fp32_by_job.count(job)) lora_fp32_by_job[job] = lora_reference_step(job, "float32");
  release_torch_cuda_cache();
}

decode_engine& suite_gpu_session::impl::current_engine() {
  if (!engine) throw std::logic_error("no decode engine in set-up " + group);
  return *engine;
}

suite_gpu_session::suite_gpu_session(const suite_gpu_settings& s) : p_(std::make_unique<impl>()) {
  p_->settings = s;
}

suite_gpu_session::~suite_gpu_session() {
  try {
    p_->leave_group();
  } catch (...) { // a tenant's error was already reported by the workload that saw it
  }
}

measured_workload suite_gpu_session::run(const suite_workload& w) {
  p_->enter_group(w.setup);
  if (w.level == "kernel") return run_kernel_workload(*p_, w); // its timer reads the clocks
  // The other levels time on the host: the SM clock is read beside them (timing/clock_watch.h).
  if (!p_->nvml) p_->nvml = std::make_unique<nvml_session>();
  const std::chrono::milliseconds period(100);
  clock_watch watch(*p_->nvml, period);
  measured_workload m;
  if (w.kind == "decode_step")
    m = run_decode_step_workload(*p_, w);
  else if (w.kind == "serving_throughput" || w.kind == "serving_p99")
    m = run_serving_workload(*p_, w);
  else if (w.kind == "lora_training")
    m = run_training_workload(*p_, w);
  else
    throw std::invalid_argument("the suite runner has no executor for kind '" + w.kind + "'");
  m.extra["gpu_clocks"] = clock_watch_json(watch.stop(), period);
  return m;
}

nlohmann::json suite_gpu_session::check_overrides() {
  nlohmann::json out = nlohmann::json::array();
  for (auto& o : p_->settings.overrides) {
    check_gemv_override(o);
    out.push_back({{"role", o.role},
                   {"source", o.source.string()},
                   {"sha256", o.sha256},
                   {"oracle", o.oracle}});
  }
  return out;
}

nlohmann::json suite_gpu_session::roles(const suite_workload& w) const {
  nlohmann::json out = nlohmann::json::object();
  const auto& hashes = role_source_sha256();
  for (const auto& [role, impl] : w.roles) {
    nlohmann::json r = {{"implementation", impl}};
    const auto ov = std::find_if(p_->settings.overrides.begin(), p_->settings.overrides.end(),
                                 [&](const role_override& o) { return o.role == role; });
    if (ov != p_->settings.overrides.end())
      r = {{"implementation", "override:" + ov->source.string()}, {"sha256", ov->sha256}};
    else if (const auto it = hashes.find(impl); it != hashes.end())
      r["sha256"] = it->second;
    else if (impl.rfind("libtorch.", 0) == 0)
      r["version"] = torch_version();
    else if (impl.rfind("cublas.", 0) == 0)
      r["version"] = cublas_version();
    else
      r["sha256"] = "unknown: not a built-in implementation";
    out[role] = r;
  }
  return out;
}

nlohmann::json suite_gpu_session::setups() const {
  return p_->setups;
}

} // namespace kg
