#include "suite/worker.h"

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <vector>

#include <dlfcn.h>

#include <cuda_runtime_api.h>
#include <nlohmann/json.hpp>

#include "kernels/abi/kg_candidate.h"
#include "oracles/device_allclose.h"
#include "reports/sha256.h"
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
    if (ptr) (void)cudaFree(ptr);
  }
  device_tensor(const device_tensor&) = delete;
  device_tensor(device_tensor&& o) noexcept : ptr(o.ptr), bytes(o.bytes), t(o.t) {
    o.ptr = nullptr;
  }
};

std::string device_hash(const device_tensor& d) {
  std::vector<std::byte> host(d.bytes);
  check(cudaMemcpy(host.data(), d.ptr, d.bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  return sha256_hex(host);
}

// The input sets honest timing rotates over, with the fp64 oracle's outputs (as float32) to
// check timed calls against on the device.
struct timing_set {
  std::vector<device_tensor> in, out;
  std::vector<kg_tensor> tin, tout;
  std::vector<float*> expected; // per output, device (float outputs only)
  std::vector<std::size_t> numel;
  std::vector<double> atol, rtol;
  ~timing_set() {
    for (auto* e : expected)
      if (e) (void)cudaFree(e);
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

nlohmann::json time_candidate(const nlohmann::json& t, kg_run_fn run) {
  std::vector<std::unique_ptr<timing_set>> sets;
  for (const auto& j : t.at("sets"))
    sets.push_back(load_set(j));
  timing_options o;
  o.max_wall_seconds = t.value("max_wall_seconds", 2.0);
  o.min_gpu_seconds = t.value("min_gpu_seconds", 0.05);
  o.target_rel_halfwidth = t.value("target_rel_halfwidth", 0.005);
  gpu_timer timer(o);
  nlohmann::json out;
  std::string run_error;
  auto cand = timing_work(run, sets, run_error);
  const auto rc = timer.measure_honest(cand);
  out["candidate"] = rc.to_json(false);
  if (!run_error.empty()) out["error"] = run_error;
  if (rc.status != "TIMED" || !run_error.empty() || !t.contains("baseline_shared_object"))
    return out;
  void* so =
      dlopen(t.at("baseline_shared_object").get<std::string>().c_str(), RTLD_NOW | RTLD_LOCAL);
  const auto base_run = so ? reinterpret_cast<kg_run_fn>(dlsym(so, "kg_run")) : nullptr;
  if (!base_run) {
    out["baseline_error"] = "cannot load the baseline kernel";
    return out;
  }
  auto base = timing_work(base_run, sets, run_error);
  const auto rb = timer.measure_honest(base);
  out["baseline"] = rb.to_json(false);
  if (rb.status != "TIMED") return out;
  // ABBA pairs on set 0: the speed ratio with drift cancelled.
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
  out["paired"] = measure_paired(timer, a, b, po).to_json();
  return out;
}

} // namespace

int run_worker(const std::string& manifest_path) {
  nlohmann::json m;
  try {
    std::ifstream in(manifest_path);
    m = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    std::cerr << "worker: bad manifest " << manifest_path << ": " << e.what() << "\n";
    return 2;
  }
  nlohmann::json result = {{"trials", nlohmann::json::array()}};
  const std::string result_file = m.at("result");
  auto write_result = [&] { std::ofstream(result_file) << result.dump() << "\n"; };
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
    return 3;
  }
  // The candidate links the shared CUDA runtime, which starts its own threads on first use.
  // Start it now, so that the thread count around kg_run sees only threads the candidate made.
  for (const char* lib : {"libcudart.so.13", "libcudart.so.12", "libcudart.so"})
    if (void* h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD)) {
      using free_fn = int (*)(void*);
      if (auto f = reinterpret_cast<free_fn>(dlsym(h, "cudaFree"))) (void)f(nullptr);
      result["candidate_runtime"] = lib;
      break;
    }
  try {
    cudaStream_t stream = nullptr;
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    for (const auto& trial : m.at("trials")) {
      std::vector<device_tensor> in, out;
      std::vector<std::string> before;
      for (const auto& x : trial.at("inputs")) {
        in.emplace_back(x.at("dtype").get<int>(), x.at("shape").get<std::vector<std::int64_t>>());
        const auto bytes = read_bytes(x.at("file"));
        if (bytes.size() != in.back().bytes) throw cuda_failure{"input file size mismatch"};
        check(cudaMemcpy(in.back().ptr, bytes.data(), bytes.size(), cudaMemcpyHostToDevice),
              "cudaMemcpy H2D");
        before.push_back(sha256_hex(bytes));
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
                         static_cast<int>(tout.size()), stream);
      // The whole device: work the candidate left on other streams counts as its output.
      check(cudaDeviceSynchronize(), "after kg_run");
      check(cudaGetLastError(), "after kg_run");
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const int threads_after = thread_count();
      nlohmann::json modified = nlohmann::json::array();
      for (std::size_t k = 0; k < in.size(); ++k)
        modified.push_back(device_hash(in[k]) != before[k]);
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
      write_result(); // after every trial: a later crash keeps what was seen
    }
    if (m.contains("timing")) {
      result["timing"] = time_candidate(m.at("timing"), run);
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
  return 0;
}

} // namespace kg
