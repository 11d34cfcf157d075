#include "sandbox/worker.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <nlohmann/json.hpp>

#include "oracles/device_equal.h"
#include "sandbox/worker_session.h"
#include "timing/phase_log.h"
#include "timing/timing_kernels.h"
#include "workloads/tensor.h"

namespace kg {

void check_cuda(cudaError_t e, const char* call) {
  if (e != cudaSuccess)
    throw cuda_failure{std::string(call) + ": " + cudaGetErrorName(e) + ": " +
                       cudaGetErrorString(e)};
}

device_tensor::device_tensor(int dtype_code, const std::vector<std::int64_t>& shape) {
  t.dtype = dtype_code;
  t.ndim = static_cast<std::int32_t>(shape.size());
  std::int64_t n = 1;
  for (std::size_t k = shape.size(); k-- > 0;) {
    t.shape[k] = shape[k];
    t.strides[k] = n;
    n *= shape[k];
  }
  bytes = static_cast<std::size_t>(n) * dtype_size(static_cast<dtype>(dtype_code));
  check_cuda(cudaMalloc(&ptr, bytes ? bytes : 1), "cudaMalloc");
  t.data = ptr;
}

device_tensor::~device_tensor() {
  if (ptr) {
    (void)cudaMemset(ptr, 0xff, bytes);
    (void)cudaFree(ptr);
  }
}

void upload_file(device_tensor& d, const std::string& file, pinned_buffer& staging) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) != d.bytes) {
    if (fd >= 0) ::close(fd);
    throw cuda_failure{"input file missing or of the wrong size: " + file};
  }
  auto* p = static_cast<char*>(staging.reserve(d.bytes));
  std::size_t got = 0;
  while (got < d.bytes) {
    const ssize_t n = ::read(fd, p + got, d.bytes - got);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (got != d.bytes) throw cuda_failure{"cannot read input file " + file};
  check_cuda(cudaMemcpy(d.ptr, p, d.bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
}

void download_file(const device_tensor& d, const std::string& file, pinned_buffer& staging) {
  auto* p = static_cast<char*>(staging.reserve(d.bytes));
  check_cuda(cudaMemcpy(p, d.ptr, d.bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  std::ofstream f(file, std::ios::binary);
  f.write(p, static_cast<std::streamsize>(d.bytes));
  f.close();
  if (!f) throw harness_failure{"cannot write output file " + file + " (is its scratch full?)"};
}

namespace {

const auto check = check_cuda;

int thread_count() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task"))
    ++n;
  return n;
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

// A manifest's per-trial limit ("trial_limit_seconds"): a call (kg_run and the device work it
// leaves) that outlasts it is a hang, and the worker ends at once with code 6 -- the process's end
// kills the hung kernel with the context. The result file then holds the trials before it (it is
// written between calls, never during one: the lock orders the two). A whole-run timeout in the
// parent would cost its full length per hang; a hung mutant costs this limit instead.
class trial_watchdog {
public:
  explicit trial_watchdog(double limit_seconds) : limit_(limit_seconds) {
    if (limit_ > 0) thread_ = std::jthread([this](std::stop_token st) { watch(st); });
  }
  void enter(std::size_t trial) {
    std::lock_guard<std::mutex> l(m_);
    in_call_ = true;
    trial_ = trial;
    since_ = std::chrono::steady_clock::now();
  }
  void leave() {
    std::lock_guard<std::mutex> l(m_);
    in_call_ = false;
  }

private:
  void watch(std::stop_token st) {
    std::unique_lock<std::mutex> l(m_);
    while (!st.stop_requested()) {
      cv_.wait_for(l, st, std::chrono::milliseconds(20), [] { return false; });
      if (in_call_ &&
          std::chrono::duration<double>(std::chrono::steady_clock::now() - since_).count() >
              limit_) {
        std::fprintf(stderr, "worker: trial %zu ran past its limit of %.2f s (a hang)\n", trial_,
                     limit_);
        std::fflush(stderr);
        std::_Exit(6); // (the lock stays held: the main thread writes nothing after this)
      }
    }
  }
  double limit_;
  std::mutex m_;
  std::condition_variable_any cv_;
  bool in_call_ = false;
  std::size_t trial_ = 0;
  std::chrono::steady_clock::time_point since_;
  std::jthread thread_; // last: stopped and joined before the members it reads go
};

// Runs one manifest; the result file is rewritten after every trial (a later crash keeps what was
// seen). Returns the worker's code: 0 done, 3 cannot load the candidate, 4 an output it cannot
// write, 5 CUDA error (a hang ends the process with 6: trial_watchdog).
int run_manifest(const nlohmann::json& m, const std::string& path, worker_session& s,
                 bool& left_state) {
  nlohmann::json result = {{"trials", nlohmann::json::array()}};
  const std::string result_file = m.at("result");
  auto write_result = [&] { std::ofstream(result_file) << result.dump() << "\n"; };
  // The candidate: a new evaluation ("fresh", or another object) starts from a freshly loaded
  // one; the manifests of one evaluation share it, so state it keeps between calls shows in each.
  // A manifest may name a timing manifest ("prepare_timing_of") whose input sets it loads and
  // verifies after its trials.
  if (m.value("fresh", false)) { // what an earlier evaluation prepared is not this one's
    s.prepared.reset();
    s.prepared_for.clear();
    s.prepared_bytes = 0;
  }
  nlohmann::json timing_of;
  if (m.contains("prepare_timing_of")) {
    try {
      std::ifstream in(m.at("prepare_timing_of").get<std::string>());
      timing_of = nlohmann::json::parse(in);
      (void)timing_of.at("timing");
    } catch (const std::exception& e) {
      result["error"] = std::string("cannot read the timing manifest: ") + e.what();
      write_result();
      return 2;
    }
  }
  const std::string so_path =
      (m.contains("shared_object") || timing_of.is_null() ? m : timing_of).at("shared_object");
  if (s.so && (s.so_path != so_path || m.value("fresh", false))) {
    scoped_phase phase("worker.unload_candidate");
    dlclose(s.so);
    s.so = nullptr;
  }
  if (!s.so) {
    scoped_phase phase("worker.load_candidate");
    s.so = dlopen(so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    s.so_path = so_path;
  }
  if (!s.so) {
    result["error"] = std::string("cannot load the candidate: ") + dlerror();
    write_result();
    return 3;
  }
  // A batch of candidates in one object (sandbox/candidate_batch.h) names the member's entry.
  const std::string symbol = m.value("symbol", std::string("kg_run"));
  const auto run = reinterpret_cast<kg_run_fn>(dlsym(s.so, symbol.c_str()));
  if (!run) {
    result["error"] = "the candidate does not export " + symbol;
    write_result();
    dlclose(s.so);
    s.so = nullptr;
    return 3;
  }
  start_candidate_runtime(s);
  trial_watchdog watchdog(m.value("trial_limit_seconds", 0.0));
  std::size_t trial_index = 0;
  try {
    for (const auto& trial : m.value("trials", nlohmann::json::array())) {
      std::optional<scoped_phase> phase(std::in_place, "worker.trial_setup");
      std::vector<device_tensor> in, pristine, out;
      for (const auto& x : trial.at("inputs")) {
        const auto shape = x.at("shape").get<std::vector<std::int64_t>>();
        in.emplace_back(x.at("dtype").get<int>(), shape);
        pristine.emplace_back(x.at("dtype").get<int>(), shape);
        upload_file(in.back(), x.at("file"), s.staging);
        check(cudaMemcpy(pristine.back().ptr, in.back().ptr, in.back().bytes,
                         cudaMemcpyDeviceToDevice),
              "cudaMemcpy D2D");
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
      phase.emplace("worker.trial_call");
      const int threads_before = thread_count();
      watchdog.enter(trial_index++);
      const auto t0 = std::chrono::steady_clock::now();
      // Some checked calls run behind a blocking kernel, as timed calls do: a kernel that asks
      // whether its stream is busy learns nothing from the answer.
      const bool busy = trial.value("busy", false);
      if (busy) {
        if (!s.hold_flag) {
          s.hold_flag = std::make_unique<mapped_host<int>>();
          s.hold_probe = std::make_unique<mapped_host<clock_probe>>();
        }
        *s.hold_flag->host() = 0;
        launch_blocking_kernel(s.hold_flag->device(), 1'000'000'000ull, s.hold_probe->device(),
                               s.stream);
      }
      const int rc = run(tin.data(), static_cast<int>(tin.size()), tout.data(),
                         static_cast<int>(tout.size()), s.stream);
      if (busy) *static_cast<volatile int*>(s.hold_flag->host()) = 1;
      // The whole device: work the candidate left on other streams counts as its output.
      const auto synced = cudaDeviceSynchronize();
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      watchdog.leave();
      check(synced, "after kg_run");
      check(cudaGetLastError(), "after kg_run");
      const int threads_after = thread_count();
      if (threads_after > threads_before) left_state = true;
      phase.emplace("worker.trial_outputs");
      nlohmann::json modified = nlohmann::json::array();
      for (std::size_t k = 0; k < in.size(); ++k)
        modified.push_back(!device_equal(in[k].ptr, pristine[k].ptr, in[k].bytes, s.stream));
      std::size_t k = 0;
      for (const auto& x : trial.at("outputs")) {
        download_file(out[k], x.at("file"), s.staging);
        ++k;
      }
      result["trials"].push_back({{"rc", rc},
                                  {"inputs_modified", modified},
                                  {"threads_before", threads_before},
                                  {"threads_after", threads_after},
                                  {"busy_stream", busy},
                                  {"seconds", seconds}});
      write_result();
      phase.emplace("worker.trial_free");
      in.clear();
      pristine.clear();
      out.clear();
    }
    if (!timing_of.is_null()) { // load and verify that manifest's timing sets, time nothing
      scoped_phase phase("worker.prepare");
      s.prepared = prepare_timing(timing_of.at("timing"), run, s);
      s.prepared_for = m.at("prepare_timing_of");
      result["prepared"] = true;
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
  } catch (const harness_failure& f) {
    result["error"] = f.what;
    write_result();
    return 4;
  } catch (const std::exception& e) { // timing_error, cuda_error from the harness
    result["error"] = std::string("timing: ") + e.what();
    write_result();
    return 5;
  }
  write_result();
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
    // Prepared timing sets are held on purpose until their timing request (counted as free
    // here); a new timer re-baselines what the session itself holds. Free memory is the whole
    // device's: other workers' inputs and prepared sets move it by gigabytes while this one
    // runs, so only a drop past a thirty-second of the device (4.4 GB on the H200) is a leak.
    bool leaked = false;
    if (code == 0) {
      const std::size_t free_own = free_now + s.prepared_bytes;
      if (s.rebaseline) {
        s.free_bytes_at_start = std::min(s.free_bytes_at_start, free_own);
        s.rebaseline = false;
      } else {
        leaked = free_own + std::max<std::size_t>(256u << 20, total / 32) < s.free_bytes_at_start;
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
