#include "sandbox/worker.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
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
#include "oracles/device_fingerprint.h"
#include "sandbox/resident_inputs.h"
#include "sandbox/worker_session.h"
#include "sandbox/worker_sync.h"
#include "timing/phase_log.h"
#include "timing/timing_kernels.h"
#include "workloads/tensor.h"

namespace kg {

worker_session::worker_session() = default;
worker_session::~worker_session() = default;

void check_cuda(cudaError_t e, const char* call) {
  if (e != cudaSuccess)
    throw cuda_failure{std::string(call) + ": " + cudaGetErrorName(e) + ": " +
                       cudaGetErrorString(e)};
}

kg_tensor describe_tensor(int dtype_code, const std::vector<std::int64_t>& shape) {
  kg_tensor t{};
  t.dtype = dtype_code;
  t.ndim = static_cast<std::int32_t>(shape.size());
  std::int64_t n = 1;
  for (std::size_t k = shape.size(); k-- > 0;) {
    t.shape[k] = shape[k];
    t.strides[k] = n;
    n *= shape[k];
  }
  return t;
}

std::size_t tensor_bytes(const kg_tensor& t) {
  std::size_t n = 1;
  for (int k = 0; k < t.ndim; ++k)
    n *= static_cast<std::size_t>(t.shape[k]);
  return n * dtype_size(static_cast<dtype>(t.dtype));
}

device_tensor::device_tensor(int dtype_code, const std::vector<std::int64_t>& shape,
                             std::size_t guard) {
  t = describe_tensor(dtype_code, shape);
  bytes = tensor_bytes(t);
  if (guard > 0) guard_size = (std::max(guard, bytes) + 255) / 256 * 256; // keeps 256-B alignment
  const std::size_t total = bytes + 2 * guard_size;
  check_cuda(cudaMalloc(&base, total ? total : 1), "cudaMalloc");
  if (guard_size > 0) check_cuda(cudaMemset(base, 0xff, total), "cudaMemset (guards)");
  ptr = static_cast<char*>(base) + guard_size;
  t.data = ptr;
}

device_tensor::~device_tensor() {
  if (base) {
    (void)cudaMemset(base, 0xff, bytes + 2 * guard_size);
    (void)cudaFree(base);
  }
}

bool device_tensor::guards_intact(cudaStream_t stream) const {
  if (guard_size == 0) return true;
  return device_all_bytes(base, guard_size, 0xff, stream) &&
         device_all_bytes(static_cast<char*>(ptr) + bytes, guard_size, 0xff, stream);
}

namespace {

// Exactly `bytes` of `file` into dst (throws cuda_failure if missing, of another size or
// unreadable).
void read_file_into(const std::string& file, std::size_t bytes, char* dst) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) != bytes) {
    if (fd >= 0) ::close(fd);
    throw cuda_failure{"input file missing or of the wrong size: " + file};
  }
  std::size_t got = 0;
  while (got < bytes) {
    const ssize_t n = ::read(fd, dst + got, bytes - got);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (got != bytes) throw cuda_failure{"cannot read input file " + file};
}

} // namespace

char* read_into_staging(const std::string& file, std::size_t bytes, pinned_buffer& staging) {
  auto* p = static_cast<char*>(staging.reserve(bytes));
  read_file_into(file, bytes, p);
  return p;
}

void upload_file(device_tensor& d, const std::string& file, pinned_buffer& staging) {
  const char* p = read_into_staging(file, d.bytes, staging);
  check_cuda(cudaMemcpy(d.ptr, p, d.bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
}

void write_bytes(const void* p, std::size_t n, const std::string& file) {
  std::ofstream f(file, std::ios::binary);
  f.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
  f.close();
  if (!f) throw harness_failure{"cannot write output file " + file + " (is its scratch full?)"};
}

void download_file(const device_tensor& d, const std::string& file, pinned_buffer& staging) {
  auto* p = static_cast<char*>(staging.reserve(d.bytes));
  check_cuda(cudaMemcpy(p, d.ptr, d.bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  write_bytes(p, d.bytes, file);
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

// What one call did.
struct call_record {
  int rc = 0;
  double seconds = 0;
  int threads_before = 0, threads_after = 0;
};

using call_fn = std::function<void(std::vector<kg_tensor>&, std::vector<kg_tensor>&)>;

// A trial on buffers of its own: each input read from its file into a new buffer with a pristine
// copy beside it, outputs filled with NaN, everything freed (and scrubbed) after. Returns, per
// input, whether the call changed it.
nlohmann::json fresh_trial(const nlohmann::json& trial, worker_session& s, std::size_t guard,
                           bool& wrote_outside, const call_fn& call) {
  std::optional<scoped_phase> phase(std::in_place, "worker.trial_setup");
  std::vector<device_tensor> in, pristine, out;
  for (const auto& x : trial.at("inputs")) {
    const auto shape = x.at("shape").get<std::vector<std::int64_t>>();
    in.emplace_back(x.at("dtype").get<int>(), shape, guard);
    pristine.emplace_back(x.at("dtype").get<int>(), shape);
    upload_file(in.back(), x.at("file"), s.staging);
    check(cudaMemcpy(pristine.back().ptr, in.back().ptr, in.back().bytes, cudaMemcpyDeviceToDevice),
          "cudaMemcpy D2D");
  }
  for (const auto& x : trial.at("outputs")) {
    out.emplace_back(x.at("dtype").get<int>(), x.at("shape").get<std::vector<std::int64_t>>(),
                     guard);
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
  call(tin, tout);
  phase.emplace("worker.trial_outputs");
  nlohmann::json modified = nlohmann::json::array();
  for (std::size_t k = 0; k < in.size(); ++k)
    modified.push_back(!device_equal(in[k].ptr, pristine[k].ptr, in[k].bytes, s.stream));
  wrote_outside = false;
  for (const auto* v : {&in, &out})
    for (const auto& d : *v)
      wrote_outside = wrote_outside || !d.guards_intact(s.stream);
  std::size_t k = 0;
  for (const auto& x : trial.at("outputs")) {
    download_file(out[k], x.at("file"), s.staging);
    ++k;
  }
  phase.emplace("worker.trial_free");
  return modified;
}

// A fresh trial's buffers from the session's pool (manifests with "pool_bytes"): the same inputs
// read from their files, pristine copies, NaN outputs and 0xff guards as fresh_trial, but no
// cudaMalloc or cudaFree (each synchronizes the device), and the uploads, checks and copies back
// queued with one wait before the call and one after it. A pool block is scrubbed (0xff) on the
// stream whenever it is handed out, so guards and outputs start as fresh_trial's do and no
// candidate finds an earlier one's output. Idle blocks past `budget` bytes are freed. Returns
// what fresh_trial returns.
nlohmann::json pooled_trial(const nlohmann::json& trial, worker_session& s, std::size_t guard,
                            std::size_t budget, bool& wrote_outside, const call_fn& call) {
  std::optional<scoped_phase> phase(std::in_place, "worker.trial_setup");
  if (!s.pooled) s.pooled = std::make_unique<pooled_buffers>();
  auto& p = *s.pooled;
  struct block {
    void* base = nullptr;
    char* ptr = nullptr;
    std::size_t bytes = 0, guard = 0;
    kg_tensor t{};
  };
  std::vector<block> in, pristine, out;
  // Blocks go back to the pool (scrubbed on the stream) however the trial ends.
  struct give_back {
    pooled_buffers& p;
    std::vector<block>* lists[3];
    cudaStream_t stream;
    std::size_t budget;
    ~give_back() {
      for (auto* v : lists)
        for (auto& b : *v)
          if (b.base) try {
              p.pool.release(b.base, stream);
            } catch (const cuda_failure&) {
            }
      p.pool.trim(budget);
    }
  } returned{p, {&in, &pristine, &out}, s.stream, budget};
  auto take = [&](int dtype_code, const nlohmann::json& shape, std::size_t g) {
    block b;
    b.t = describe_tensor(dtype_code, shape.get<std::vector<std::int64_t>>());
    b.bytes = tensor_bytes(b.t);
    if (g > 0) b.guard = (std::max(g, b.bytes) + 255) / 256 * 256; // as device_tensor's
    b.base = p.pool.acquire(b.bytes + 2 * b.guard, s.stream);      // all 0xff
    b.ptr = static_cast<char*>(b.base) + b.guard;
    b.t.data = b.ptr;
    return b;
  };
  const auto aligned = [](std::size_t n) { return (n + 255) / 256 * 256; };
  const auto& inputs = trial.at("inputs");
  std::size_t staged_bytes = 0;
  for (const auto& x : inputs) {
    in.push_back(take(x.at("dtype").get<int>(), x.at("shape"), guard));
    pristine.push_back(take(x.at("dtype").get<int>(), x.at("shape"), 0));
    staged_bytes += aligned(in.back().bytes);
  }
  auto* staged = static_cast<char*>(s.staging.reserve(std::max<std::size_t>(staged_bytes, 1)));
  std::size_t at = 0;
  for (std::size_t k = 0; k < in.size(); ++k) {
    read_file_into(inputs[k].at("file"), in[k].bytes, staged + at);
    check(cudaMemcpyAsync(in[k].ptr, staged + at, in[k].bytes, cudaMemcpyHostToDevice, s.stream),
          "cudaMemcpy H2D");
    check(cudaMemcpyAsync(pristine[k].ptr, in[k].ptr, in[k].bytes, cudaMemcpyDeviceToDevice,
                          s.stream),
          "cudaMemcpy D2D");
    at += aligned(in[k].bytes);
  }
  for (const auto& x : trial.at("outputs")) // NaN for floats, -1 for integers: the scrub's 0xff
    out.push_back(take(x.at("dtype").get<int>(), x.at("shape"), guard));
  std::vector<kg_tensor> tin, tout;
  for (auto& b : in)
    tin.push_back(b.t);
  for (auto& b : out)
    tout.push_back(b.t);
  // (also the staging's reuse below: the uploads are done)
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (before)");
  phase.emplace("worker.trial_call");
  call(tin, tout);
  phase.emplace("worker.trial_outputs");
  // Flags: one per input (changed), then two per guarded buffer (front, back).
  std::size_t guarded = 0;
  for (const auto* v : {&in, &out})
    for (const auto& b : *v)
      guarded += b.guard > 0;
  const std::size_t n_flags = in.size() + 2 * guarded;
  unsigned int* flags = p.flags_for(std::max<std::size_t>(n_flags, 1));
  check(cudaMemsetAsync(flags, 0, n_flags * sizeof(unsigned int), s.stream), "cudaMemsetAsync");
  for (std::size_t k = 0; k < in.size(); ++k)
    launch_differ(in[k].ptr, pristine[k].ptr, in[k].bytes, flags + k, s.stream);
  std::size_t f = in.size();
  for (const auto* v : {&in, &out})
    for (const auto& b : *v)
      if (b.guard > 0) {
        launch_not_value(b.base, b.guard, 0xff, flags + f++, s.stream);
        launch_not_value(b.ptr + b.bytes, b.guard, 0xff, flags + f++, s.stream);
      }
  auto* flags_host = static_cast<unsigned int*>(
      p.flags_host.reserve(std::max<std::size_t>(n_flags, 1) * sizeof(unsigned int)));
  check(cudaMemcpyAsync(flags_host, flags, n_flags * sizeof(unsigned int), cudaMemcpyDeviceToHost,
                        s.stream),
        "cudaMemcpy D2H (checks)");
  std::size_t out_bytes = 0;
  for (const auto& b : out)
    out_bytes += aligned(b.bytes);
  staged = static_cast<char*>(s.staging.reserve(std::max<std::size_t>(out_bytes, 1)));
  at = 0;
  for (const auto& b : out) {
    check(cudaMemcpyAsync(staged + at, b.ptr, b.bytes, cudaMemcpyDeviceToHost, s.stream),
          "cudaMemcpy D2H");
    at += aligned(b.bytes);
  }
  check(cudaStreamSynchronize(s.stream), "cudaStreamSynchronize (outputs)");
  nlohmann::json modified = nlohmann::json::array();
  for (std::size_t k = 0; k < in.size(); ++k)
    modified.push_back(flags_host[k] != 0);
  wrote_outside = false;
  for (std::size_t k = in.size(); k < n_flags; ++k)
    wrote_outside = wrote_outside || flags_host[k] != 0;
  at = 0;
  std::size_t k = 0;
  for (const auto& x : trial.at("outputs")) {
    write_bytes(staged + at, out[k].bytes, x.at("file"));
    at += aligned(out[k].bytes);
    ++k;
  }
  phase.emplace("worker.trial_free"); // (the blocks go back as `returned` ends)
  return modified;
}

// A trial on the session's resident state (sandbox/resident_inputs.h): each input copied on the
// device from its kept copy (uploaded once per worker), outputs from the pool (scrubbed, so NaN
// as above), every check and copy back queued behind one synchronization. Returns what
// fresh_trial returns.
nlohmann::json resident_trial(const nlohmann::json& trial, worker_session& s, std::size_t budget,
                              const call_fn& call) {
  std::optional<scoped_phase> phase(std::in_place, "worker.trial_setup");
  if (!s.resident) s.resident = std::make_unique<resident_state>();
  auto& r = *s.resident;
  const auto& inputs = trial.at("inputs");
  const auto& outputs = trial.at("outputs");
  struct held {
    std::string file;
    const void* kept = nullptr;
    void* ptr = nullptr;
    kg_tensor t{};
  };
  std::vector<held> in, out;
  // Blocks go back to the pool (scrubbed) however the trial ends; a CUDA error ends the worker.
  struct give_back {
    resident_state& r;
    std::vector<held>& a;
    std::vector<held>& b;
    cudaStream_t stream;
    ~give_back() {
      for (auto* v : {&a, &b})
        for (auto& h : *v)
          if (h.ptr) try {
              r.pool.release(h.ptr, stream);
            } catch (const cuda_failure&) {
            }
      r.inputs.settle();
    }
  } returned{r, in, out, s.stream};
  auto* checks = r.checks_for(std::max<std::size_t>(inputs.size(), 1));
  auto* checks_host = static_cast<fingerprint_result*>(
      r.checks_host.reserve(std::max<std::size_t>(inputs.size(), 1) * sizeof(fingerprint_result)));
  for (const auto& x : inputs) {
    held h;
    h.file = x.at("file");
    h.t = describe_tensor(x.at("dtype").get<int>(), x.at("shape").get<std::vector<std::int64_t>>());
    in.push_back(h);
  }
  for (const auto& x : outputs) {
    held h;
    h.t = describe_tensor(x.at("dtype").get<int>(), x.at("shape").get<std::vector<std::int64_t>>());
    h.ptr = r.pool.acquire(tensor_bytes(h.t), s.stream); // 0xff: NaN for floats, -1 ints
    out.push_back(h);
  }
  std::size_t total = 0;
  for (const auto& h : out)
    total += tensor_bytes(h.t);
  char* staged = nullptr;
  nlohmann::json modified;
  // The kept copies are checked after the call: one found changed then (an earlier candidate, or
  // this call, wrote into it) is uploaded again and the trial run once more; changed again, this
  // call wrote there, and its compare against the copy says so.
  for (int attempt = 0;; ++attempt) {
    phase.emplace("worker.trial_setup");
    for (auto& h : in) {
      const std::size_t bytes = tensor_bytes(h.t);
      h.kept = r.inputs.get(h.file, bytes, s.staging, s.stream);
      if (!h.ptr) h.ptr = r.pool.acquire(bytes, s.stream);
      check(cudaMemcpyAsync(h.ptr, h.kept, bytes, cudaMemcpyDeviceToDevice, s.stream),
            "cudaMemcpy D2D");
    }
    if (attempt > 0)
      for (auto& h : out) // (the first try's outputs are not this one's)
        check(cudaMemsetAsync(h.ptr, 0xff, tensor_bytes(h.t), s.stream), "cudaMemsetAsync");
    std::vector<kg_tensor> tin, tout;
    for (auto& h : in) {
      h.t.data = h.ptr;
      tin.push_back(h.t);
    }
    for (auto& h : out) {
      h.t.data = h.ptr;
      tout.push_back(h.t);
    }
    // The copies done before the call: a candidate may launch on the legacy default stream,
    // which does not wait for this (non-blocking) one.
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (before)");
    phase.emplace("worker.trial_call");
    call(tin, tout);
    phase.emplace("worker.trial_outputs");
    for (std::size_t k = 0; k < in.size(); ++k)
      launch_fingerprint(in[k].kept, in[k].ptr, tensor_bytes(in[k].t), checks + k, s.stream);
    check(cudaMemcpyAsync(checks_host, checks, in.size() * sizeof(fingerprint_result),
                          cudaMemcpyDeviceToHost, s.stream),
          "cudaMemcpy D2H (checks)");
    staged = static_cast<char*>(s.staging.reserve(std::max<std::size_t>(total, 1)));
    std::size_t at = 0;
    for (const auto& h : out) {
      check(
          cudaMemcpyAsync(staged + at, h.ptr, tensor_bytes(h.t), cudaMemcpyDeviceToHost, s.stream),
          "cudaMemcpy D2H");
      at += tensor_bytes(h.t);
    }
    check(cudaStreamSynchronize(s.stream), "cudaStreamSynchronize (outputs)");
    modified = nlohmann::json::array();
    bool changed = false;
    for (std::size_t k = 0; k < in.size(); ++k) {
      modified.push_back(checks_host[k].differ != 0);
      if (checks_host[k].fingerprint != r.inputs.fingerprint(in[k].file)) {
        r.inputs.drop(in[k].file, s.stream);
        changed = true;
      }
    }
    if (!changed || attempt == 1) break;
  }
  std::size_t at = 0, k = 0;
  for (const auto& x : outputs) {
    write_bytes(staged + at, tensor_bytes(out[k].t), x.at("file"));
    at += tensor_bytes(out[k].t);
    ++k;
  }
  phase.emplace("worker.trial_free");
  for (auto* v : {&in, &out})
    for (auto& h : *v) {
      r.pool.release(h.ptr, s.stream);
      h.ptr = nullptr;
    }
  r.inputs.settle();
  r.inputs.fit(budget, s.stream);
  return modified;
}

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
  // The call itself, the same for both ways of providing buffers.
  auto call = [&](std::vector<kg_tensor>& tin, std::vector<kg_tensor>& tout, bool busy) {
    call_record c;
    c.threads_before = thread_count();
    watchdog.enter(trial_index++);
    const auto t0 = std::chrono::steady_clock::now();
    // Some checked calls run behind a blocking kernel, as timed calls do: a kernel that asks
    // whether its stream is busy learns nothing from the answer.
    if (busy) {
      if (!s.hold_flag) {
        s.hold_flag = std::make_unique<mapped_host<int>>();
        s.hold_probe = std::make_unique<mapped_host<clock_probe>>();
      }
      *s.hold_flag->host() = 0;
      launch_blocking_kernel(s.hold_flag->device(), 1'000'000'000ull, s.hold_probe->device(),
                             s.stream);
    }
    c.rc = run(tin.data(), static_cast<int>(tin.size()), tout.data(), static_cast<int>(tout.size()),
               s.stream);
    if (busy) *static_cast<volatile int*>(s.hold_flag->host()) = 1;
    // The whole device: work the candidate left on other streams counts as its output.
    const auto synced = cudaDeviceSynchronize();
    c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    watchdog.leave();
    check(synced, "after kg_run");
    check(cudaGetLastError(), "after kg_run");
    c.threads_after = thread_count();
    if (c.threads_after > c.threads_before) left_state = true;
    return c;
  };
  const auto resident_budget = m.value("resident_bytes", std::size_t{0});
  const auto guard = m.value("guard_bytes", std::size_t{0}); // (fresh and pooled buffers)
  const auto pool_budget = m.value("pool_bytes", std::size_t{0});
  try {
    for (const auto& trial : m.value("trials", nlohmann::json::array())) {
      const bool busy = trial.value("busy", false);
      call_record c;
      nlohmann::json modified;
      bool wrote_outside = false;
      if (resident_budget > 0)
        modified = resident_trial(trial, s, resident_budget,
                                  [&](auto& tin, auto& tout) { c = call(tin, tout, busy); });
      else if (pool_budget > 0)
        modified = pooled_trial(trial, s, guard, pool_budget, wrote_outside,
                                [&](auto& tin, auto& tout) { c = call(tin, tout, busy); });
      else
        modified = fresh_trial(trial, s, guard, wrote_outside,
                               [&](auto& tin, auto& tout) { c = call(tin, tout, busy); });
      result["trials"].push_back({{"rc", c.rc},
                                  {"inputs_modified", modified},
                                  {"wrote_outside", wrote_outside},
                                  {"threads_before", c.threads_before},
                                  {"threads_after", c.threads_after},
                                  {"busy_stream", busy},
                                  {"seconds", c.seconds}});
      write_result();
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
  scoped_phase phase("worker.open_session"); // (the CUDA context comes up here)
  try {
    // Before the context exists, so that every wait in it follows the flag (sandbox/worker_sync.h).
    const char* sync = std::getenv("KERNELGATE_WORKER_SYNC");
    const auto flag = worker_sync_flag(sync ? sync : "");
    if (!flag)
      throw cuda_failure{std::string("KERNELGATE_WORKER_SYNC='") + sync +
                         "' is not one of auto, spin, yield, block"};
    if (*flag != cudaDeviceScheduleAuto) check(cudaSetDeviceFlags(*flag), "cudaSetDeviceFlags");
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
  // The parent times each request from here: a context can take many seconds to come up while
  // the GPU is busy, and that is not the candidate's time (worker_process::run).
  if (::write(reply_fd, "ready\n", 6) != 6) return 2;
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
      const std::size_t free_own =
          free_now + s.prepared_bytes + (s.resident ? s.resident->pool.held_bytes() : 0);
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
