#include "suite/worker.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <vector>

#include <dlfcn.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <nlohmann/json.hpp>

#include "kernels/abi/kg_candidate.h"
#include "kernels/task_torch_refs.h"
#include "oracles/device_allclose.h"
#include "oracles/device_equal.h"
#include "timing/gpu_timer.h"
#include "timing/paired.h"
#include "workloads/tensor.h"

namespace kg {
namespace {

using kg_run_fn = int (*)(const kg_tensor*, int, kg_tensor*, int, cudaStream_t);

struct cuda_failure {
  std::string what;
};

void check(cudaError_t e, const char* call) {
  if (e != cudaSuccess)
    throw cuda_failure{std::string(call) + ": " + cudaGetErrorName(e) + ": " +
                       cudaGetErrorString(e)};
}

int thread_count() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task"))
    ++n;
  return n;
}

std::vector<std::byte> read_bytes(const std::string& f) {
  std::ifstream in(f, std::ios::binary | std::ios::ate);
  std::vector<std::byte> b(in ? static_cast<std::size_t>(in.tellg()) : 0);
  in.seekg(0);
  in.read(reinterpret_cast<char*>(b.data()), static_cast<std::streamsize>(b.size()));
  return b;
}

// One tensor on the device, described for kg_run.
struct device_tensor {
  void* ptr = nullptr;
  std::size_t bytes = 0;
  kg_tensor t{};
  device_tensor(int dtype_code, const std::vector<std::int64_t>& shape) {
    t.dtype = dtype_code;
    t.ndim = static_cast<std::int32_t>(shape.size());
    std::int64_t n = 1;
    for (std::size_t k = shape.size(); k-- > 0;) {
      t.shape[k] = shape[k];
      t.strides[k] = n;
      n *= shape[k];
    }
    bytes = static_cast<std::size_t>(n) * dtype_size(static_cast<dtype>(dtype_code));
    check(cudaMalloc(&ptr, bytes ? bytes : 1), "cudaMalloc");
    t.data = ptr;
  }
  ~device_tensor() {
    // Scrubbed before it is freed: the next candidate in this worker gets the same inputs (same
    // seeds), and a fresh allocation can hand back this memory -- an earlier candidate's correct
    // output would otherwise be there to copy (KernelBench's freed-buffer exploit).
    if (ptr) {
      (void)cudaMemset(ptr, 0xff, bytes);
      (void)cudaFree(ptr);
    }
  }
  device_tensor(const device_tensor&) = delete;
  device_tensor(device_tensor&& o) noexcept : ptr(o.ptr), bytes(o.bytes), t(o.t) {
    o.ptr = nullptr;
  }
};

// The input sets honest timing rotates over, with the fp64 oracle's outputs (as float32) to
// check timed calls against on the device.
struct timing_set {
  std::vector<device_tensor> in, out;
  std::vector<kg_tensor> tin, tout;
  std::vector<float*> expected; // per output, device (float outputs only)
  std::vector<std::size_t> numel;
  std::vector<double> atol, rtol;
  ~timing_set() {
    for (std::size_t k = 0; k < expected.size(); ++k)
      if (expected[k]) { // scrubbed like device_tensor's: these are right answers
        (void)cudaMemset(expected[k], 0xff, numel[k] * sizeof(float));
        (void)cudaFree(expected[k]);
      }
  }
};

std::unique_ptr<timing_set> load_set(const nlohmann::json& j) {
  auto set = std::make_unique<timing_set>();
  for (const auto& x : j.at("inputs")) {
    set->in.emplace_back(x.at("dtype").get<int>(), x.at("shape").get<std::vector<std::int64_t>>());
    const auto bytes = read_bytes(x.at("file"));
    if (bytes.size() != set->in.back().bytes) throw cuda_failure{"timing input size mismatch"};
    check(cudaMemcpy(set->in.back().ptr, bytes.data(), bytes.size(), cudaMemcpyHostToDevice),
          "cudaMemcpy H2D");
  }
  for (const auto& x : j.at("outputs")) {
    set->out.emplace_back(x.at("dtype").get<int>(), x.at("shape").get<std::vector<std::int64_t>>());
    const auto bytes = read_bytes(x.at("expected"));
    float* e = nullptr;
    check(cudaMalloc(reinterpret_cast<void**>(&e), bytes.size() ? bytes.size() : 4), "cudaMalloc");
    check(cudaMemcpy(e, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
    set->expected.push_back(e);
    set->numel.push_back(bytes.size() / 4);
    set->atol.push_back(x.at("atol").get<double>());
    set->rtol.push_back(x.at("rtol").get<double>());
  }
  for (auto& d : set->in)
    set->tin.push_back(d.t);
  for (auto& d : set->out)
    set->tout.push_back(d.t);
  return set;
}

// Honest timing of one shared object's kg_run over the sets (the last set is the fresh one).
honest_work timing_work(kg_run_fn run, std::vector<std::unique_ptr<timing_set>>& sets,
                        std::string& run_error) {
  honest_work w;
  w.timed_sets = static_cast<int>(sets.size()) - 1;
  w.launch = [run, &sets, &run_error](int i, cudaStream_t s) {
    auto& set = *sets[static_cast<std::size_t>(i)];
    const int rc = run(set.tin.data(), static_cast<int>(set.tin.size()), set.tout.data(),
                       static_cast<int>(set.tout.size()), s);
    if (rc != 0 && run_error.empty()) run_error = "kg_run returned " + std::to_string(rc);
  };
  w.poison = [&sets](int i, cudaStream_t s) {
    for (auto& o : sets[static_cast<std::size_t>(i)]->out)
      KG_CUDA_CHECK(cudaMemsetAsync(o.ptr, 0xff, o.bytes, s));
  };
  w.check = [&sets](int i) -> std::string {
    auto& set = *sets[static_cast<std::size_t>(i)];
    for (std::size_t k = 0; k < set.out.size(); ++k) {
      const auto type = static_cast<dtype>(set.out[k].t.dtype);
      if (!is_floating(type)) continue; // integer outputs are checked before timing only
      const auto r = device_allclose(set.out[k].ptr, type, set.expected[k], set.numel[k],
                                     static_cast<float>(set.atol[k]),
                                     static_cast<float>(set.rtol[k]), nullptr);
      if (r.mismatches)
        return "output " + std::to_string(k) + ": " + std::to_string(r.mismatches) +
               " elements outside tolerance (first at " + std::to_string(r.first) + ")";
    }
    return "";
  };
  return w;
}

// What a worker keeps from one manifest to the next in serve mode: its stream, a timer (CUPTI,
// NVML and the L2 flush buffer are set up once), and what the device looked like at the start.
struct worker_session {
  cudaStream_t stream = nullptr;
  std::string timer_key; // the options the timer was made with
  std::unique_ptr<gpu_timer> timer;
  std::size_t free_bytes_at_start = 0; // device memory free with only the session's own state
  bool rebaseline = false;             // the session's own state grew (a new timer)
  int threads_at_start = 0;
  bool runtime_started = false;
  std::string candidate_runtime;
  // Timing sets loaded ahead (a "prepare_timing_of" manifest, run while other workers may use
  // the GPU) for the timing manifest at prepared_for: uploading them is not timing, so it need
  // not hold the GPU alone.
  std::string prepared_for;
  std::vector<std::unique_ptr<timing_set>> prepared_sets;
};

gpu_timer& session_timer(worker_session& s, const timing_options& o) {
  const std::string key = o.to_json().dump();
  if (!s.timer || s.timer_key != key) {
    s.timer.reset(); // one timer at a time: each holds CUPTI and an L2 flush buffer
    s.timer = std::make_unique<gpu_timer>(o);
    s.rebaseline = true; // its flush buffer and CUPTI buffers are the session's, not a leak
    s.timer_key = key;
  }
  return *s.timer;
}

// The task's LibTorch reference on set 0, as KernelBench times its baseline (eager, outputs from
// LibTorch's caching allocator), with the same timer. One untimed call first: LibTorch's lazy
// CUDA start-up (handles, workspaces) is not the op's time. What LibTorch keeps on the device
// afterwards (its cache) belongs to the session, not to a candidate: the leak check re-baselines.
nlohmann::json time_torch_reference(const nlohmann::json& r, timing_set& s0, gpu_timer& timer,
                                    worker_session& session) {
  const auto ref = make_torch_cuda_reference(r.at("op").get<std::string>(), r.at("params"),
                                             s0.tin.data(), static_cast<int>(s0.tin.size()));
  if (!ref.run) return {{"status", "UNAVAILABLE"}, {"status_reason", ref.error}};
  session.rebaseline = true;
  try {
    ref.run(session.stream);
    if (const auto e = cudaStreamSynchronize(session.stream); e != cudaSuccess)
      return {{"status", "ERROR"},
              {"status_reason", std::string("LibTorch reference: ") + cudaGetErrorString(e)}};
    return timer.measure(ref.run).to_json(false);
  } catch (const std::exception& e) {
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    return {{"status", "ERROR"}, {"status_reason", "LibTorch reference: " + what}};
  }
}

// Honest timing of the candidate (rotating input sets, outputs checked on the device, a fresh
// set), then, with a baseline, ABBA pairs of baseline and candidate on set 0: the speed ratio
// with drift cancelled. The baseline is the task's own (trusted) kernel: it is not audited again,
// and its time is the median of its samples in the pairs.
nlohmann::json time_candidate(const nlohmann::json& t, const std::string& manifest_path,
                              kg_run_fn run, worker_session& session) {
  std::vector<std::unique_ptr<timing_set>> sets;
  if (session.prepared_for == manifest_path) {
    sets = std::move(session.prepared_sets);
  } else {
    for (const auto& j : t.at("sets"))
      sets.push_back(load_set(j));
  }
  session.prepared_for.clear();
  session.prepared_sets.clear();
  timing_options o;
  o.max_wall_seconds = t.value("max_wall_seconds", 2.0);
  o.min_gpu_seconds = t.value("min_gpu_seconds", 0.05);
  o.target_rel_halfwidth = t.value("target_rel_halfwidth", 0.005);
  o.single_stream = true; // the candidate ABI: all work on the stream kg_run is given
  gpu_timer& timer = session_timer(session, o);
  nlohmann::json out;
  std::string run_error;
  auto cand = timing_work(run, sets, run_error);
  const auto rc = timer.measure_honest(cand);
  out["candidate"] = rc.to_json(false);
  if (!run_error.empty()) out["error"] = run_error;
  if (rc.status != "TIMED" || !run_error.empty()) return out;
  // Only for a candidate that was timed: a reference time without a candidate time is no ratio.
  if (t.contains("torch_reference"))
    out["torch_reference"] = time_torch_reference(t["torch_reference"], *sets[0], timer, session);
  if (!t.contains("baseline_shared_object")) return out;
  void* so =
      dlopen(t.at("baseline_shared_object").get<std::string>().c_str(), RTLD_NOW | RTLD_LOCAL);
  const auto base_run = so ? reinterpret_cast<kg_run_fn>(dlsym(so, "kg_run")) : nullptr;
  if (!base_run) {
    out["baseline_error"] = "cannot load the baseline kernel";
    return out;
  }
  auto& s0 = *sets[0];
  const work_fn a = [&](cudaStream_t s) {
    base_run(s0.tin.data(), static_cast<int>(s0.tin.size()), s0.tout.data(),
             static_cast<int>(s0.tout.size()), s);
  };
  const work_fn b = [&](cudaStream_t s) {
    run(s0.tin.data(), static_cast<int>(s0.tin.size()), s0.tout.data(),
        static_cast<int>(s0.tout.size()), s);
  };
  paired_options po;
  po.max_wall_seconds = t.value("paired_max_wall_seconds", 2.0);
  po.min_pairs = t.value("paired_min_pairs", po.min_pairs);
  po.target_rel_halfwidth = t.value("paired_target_rel_halfwidth", po.target_rel_halfwidth);
  const auto p = measure_paired(timer, a, b, po);
  out["paired"] = p.to_json();
  if (!p.a_us.empty()) {
    std::vector<double> a_us = p.a_us;
    std::nth_element(a_us.begin(), a_us.begin() + static_cast<long>(a_us.size() / 2), a_us.end());
    out["baseline"] = {{"status", "TIMED"},
                       {"median_us", a_us[a_us.size() / 2]},
                       {"from", "the baseline's samples in the ABBA pairs"}};
  }
  dlclose(so);
  return out;
}

// The candidate links the shared CUDA runtime, which starts its own threads on first use. Start it
// before the first call, so that the thread count around kg_run sees only threads the candidate
// made.
void start_candidate_runtime(worker_session& s) {
  if (s.runtime_started) return;
  for (const char* lib : {"libcudart.so.13", "libcudart.so.12", "libcudart.so"})
    if (void* h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD)) {
      using free_fn = int (*)(void*);
      if (auto f = reinterpret_cast<free_fn>(dlsym(h, "cudaFree"))) (void)f(nullptr);
      s.candidate_runtime = lib;
      s.runtime_started = true;
      return; // the handle stays open: the runtime outlives every candidate of the session
    }
}

// Runs one manifest; the result file is rewritten after every trial (a later crash keeps what was
// seen). Returns the worker's code: 0 done, 3 cannot load the candidate, 5 CUDA error.
int run_manifest(const nlohmann::json& m, const std::string& path, worker_session& s,
                 bool& left_state) {
  nlohmann::json result = {{"trials", nlohmann::json::array()}};
  const std::string result_file = m.at("result");
  auto write_result = [&] { std::ofstream(result_file) << result.dump() << "\n"; };
  if (m.contains("prepare_timing_of")) { // load the timing sets of that manifest, run nothing
    try {
      const std::string of = m.at("prepare_timing_of");
      std::ifstream in(of);
      const auto timing = nlohmann::json::parse(in).at("timing");
      s.prepared_sets.clear();
      for (const auto& j : timing.at("sets"))
        s.prepared_sets.push_back(load_set(j));
      s.prepared_for = of;
      result["prepared_sets"] = s.prepared_sets.size();
    } catch (const cuda_failure& f) {
      result["error"] = "CUDA error: " + f.what;
      write_result();
      return 5;
    } catch (const std::exception& e) {
      result["error"] = std::string("cannot prepare the timing sets: ") + e.what();
      write_result();
      return 2;
    }
    write_result();
    return 0;
  }
  void* so = dlopen(m.at("shared_object").get<std::string>().c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!so) {
    result["error"] = std::string("cannot load the candidate: ") + dlerror();
    write_result();
    return 3;
  }
  const auto run = reinterpret_cast<kg_run_fn>(dlsym(so, "kg_run"));
  if (!run) {
    result["error"] = "the candidate does not export kg_run";
    write_result();
    dlclose(so);
    return 3;
  }
  start_candidate_runtime(s);
  if (s.runtime_started) result["candidate_runtime"] = s.candidate_runtime;
  try {
    for (const auto& trial : m.at("trials")) {
      std::vector<device_tensor> in, pristine, out;
      for (const auto& x : trial.at("inputs")) {
        const auto shape = x.at("shape").get<std::vector<std::int64_t>>();
        in.emplace_back(x.at("dtype").get<int>(), shape);
        pristine.emplace_back(x.at("dtype").get<int>(), shape);
        const auto bytes = read_bytes(x.at("file"));
        if (bytes.size() != in.back().bytes) throw cuda_failure{"input file size mismatch"};
        check(cudaMemcpy(in.back().ptr, bytes.data(), bytes.size(), cudaMemcpyHostToDevice),
              "cudaMemcpy H2D");
        check(cudaMemcpy(pristine.back().ptr, bytes.data(), bytes.size(), cudaMemcpyHostToDevice),
              "cudaMemcpy H2D");
      }
      for (const auto& x : trial.at("outputs")) {
        out.emplace_back(x.at("dtype").get<int>(), x.at("shape").get<std::vector<std::int64_t>>());
        // NaN for every float dtype (0xffff.. is a NaN pattern); 0xff.. = -1 for integers.
        check(cudaMemset(out.back().ptr, 0xff, out.back().bytes), "cudaMemset");
      }
      std::vector<kg_tensor> tin, tout;
      for (auto& d : in)
        tin.push_back(d.t);
      for (auto& d : out)
        tout.push_back(d.t);
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (before)");
      const int threads_before = thread_count();
      const auto t0 = std::chrono::steady_clock::now();
      const int rc = run(tin.data(), static_cast<int>(tin.size()), tout.data(),
                         static_cast<int>(tout.size()), s.stream);
      // The whole device: work the candidate left on other streams counts as its output.
      check(cudaDeviceSynchronize(), "after kg_run");
      check(cudaGetLastError(), "after kg_run");
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const int threads_after = thread_count();
      if (threads_after > threads_before) left_state = true;
      nlohmann::json modified = nlohmann::json::array();
      for (std::size_t k = 0; k < in.size(); ++k)
        modified.push_back(!device_equal(in[k].ptr, pristine[k].ptr, in[k].bytes, s.stream));
      std::size_t k = 0;
      for (const auto& x : trial.at("outputs")) {
        std::vector<char> host(out[k].bytes);
        check(cudaMemcpy(host.data(), out[k].ptr, host.size(), cudaMemcpyDeviceToHost),
              "cudaMemcpy D2H");
        std::ofstream(x.at("file").get<std::string>(), std::ios::binary)
            .write(host.data(), static_cast<std::streamsize>(host.size()));
        ++k;
      }
      result["trials"].push_back({{"rc", rc},
                                  {"inputs_modified", modified},
                                  {"threads_before", threads_before},
                                  {"threads_after", threads_after},
                                  {"seconds", seconds}});
      write_result();
    }
    if (m.contains("timing")) {
      result["timing"] = time_candidate(m.at("timing"), path, run, s);
      write_result();
    }
  } catch (const cuda_failure& f) {
    result["error"] = "CUDA error: " + f.what;
    write_result();
    return 5;
  } catch (const std::exception& e) { // timing_error, cuda_error from the harness
    result["error"] = std::string("timing: ") + e.what();
    write_result();
    return 5;
  }
  write_result();
  // A candidate with threads of its own may still run code of the object: never unload it then
  // (the session ends instead).
  if (!left_state) dlclose(so);
  return 0;
}

bool read_manifest(const std::string& path, nlohmann::json& m) {
  try {
    std::ifstream in(path);
    m = nlohmann::json::parse(in);
    return true;
  } catch (const std::exception& e) {
    std::cerr << "worker: bad manifest " << path << ": " << e.what() << "\n";
    return false;
  }
}

bool open_session(worker_session& s) {
  try {
    check(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    std::size_t total = 0;
    check(cudaMemGetInfo(&s.free_bytes_at_start, &total), "cudaMemGetInfo");
  } catch (const cuda_failure& f) {
    std::cerr << "worker: " << f.what << "\n";
    return false;
  }
  s.threads_at_start = thread_count();
  return true;
}

} // namespace

int run_worker(const std::string& manifest_path) {
  nlohmann::json m;
  if (!read_manifest(manifest_path, m)) return 2;
  worker_session s;
  if (!open_session(s)) return 5;
  bool left_state = false;
  return run_manifest(m, manifest_path, s, left_state);
}

int run_worker_serve(int request_fd, int reply_fd) {
  worker_session s;
  const bool ok = open_session(s);
  FILE* requests = fdopen(request_fd, "r");
  if (!requests) return 2;
  char* line = nullptr;
  std::size_t cap = 0;
  int served = 0;
  while (getline(&line, &cap, requests) > 0) {
    std::string path(line);
    while (!path.empty() && (path.back() == '\n' || path.back() == '\r'))
      path.pop_back();
    nlohmann::json m;
    int code = 2;
    bool left_state = false;
    if (!ok)
      code = 5;
    else if (read_manifest(path, m))
      code = run_manifest(m, path, s, left_state);
    // Ending the session after this manifest: a CUDA error leaves the context unusable; threads
    // or device memory the candidate kept could reach the next candidate; and a bound on the
    // manifests served keeps any slower drift (fragmentation, runtime caches) in check.
    std::size_t free_now = 0, total = 0;
    if (code == 0 && cudaMemGetInfo(&free_now, &total) != cudaSuccess) code = 5;
    // Prepared timing sets are held on purpose until their timing request; a new timer
    // re-baselines what the session itself holds.
    bool leaked = false;
    if (code == 0 && s.prepared_for.empty()) {
      if (s.rebaseline) {
        s.free_bytes_at_start = std::min(s.free_bytes_at_start, free_now);
        s.rebaseline = false;
      } else {
        leaked = free_now + (256u << 20) < s.free_bytes_at_start;
      }
    }
    const bool recycle = code != 0 || left_state || leaked || ++served >= 200;
    const std::string reply = std::to_string(code) + (recycle ? " recycle\n" : " continue\n");
    if (::write(reply_fd, reply.data(), reply.size()) != static_cast<ssize_t>(reply.size())) break;
    if (recycle) break;
  }
  free(line);
  return 0;
}

} // namespace kg
