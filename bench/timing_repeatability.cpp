// Repeatability of timing methods, measured side by side (issue: timing and statistics).
// For each op of bench_ops (kernels/bench_ops.h), five methods each report a median in 8 fresh
// processes, interleaved round by round: kernelgate's harness (CUDA-event backend, CUPTI backend,
// and the hardware-counter backend that reads ncu's gpu__time_duration; each rotates over 4 input
// sets with buffers of their own, as kernelgate's honest timing does), a C++ re-implementation of
// KernelBench's
// loop (3 warm-ups, 100 event-timed trials, mean, no flush) and of triton's do_bench (25 ms of
// warm-up, 100 ms of repetitions, 256 MB cache zeroed before each, median). It prints per op the
// median and the CV across processes per method, and the ratio of CVs.
//
//   kg_bench_repeatability [--rounds N]          the table
//   kg_bench_repeatability --child METHOD        one process: per op one line
//                                                "op median_us host_us mean_sm_mhz samples
//                                                 per_set_medians|-"
//   kg_bench_repeatability --child ncu           launches each op 23 times (for ncu to time);
//                                                prints "kg-op OP KERNEL" per op for the script
//   kg_bench_repeatability --child host          the harness's host cost per sample, by part
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "gpu/cuda_raii.h"
#include "gpu/device_buffer.h"
#include "gpu/nvml.h"
#include "kernels/bench_ops.h"
#include "stats/summary.h"
#include "timing/gpu_timer.h"
#include "timing/timing_kernels.h"

using namespace kg;

namespace {

// Input sets kernelgate's methods rotate over (the peers' loops use one, as they document).
constexpr int kg_input_sets = 4;

double kernelbench_loop(bench_op& op, cudaStream_t s) {
  cuda_event start, stop;
  for (int i = 0; i < 3; ++i)
    op.launch(s);
  KG_CUDA_CHECK(cudaStreamSynchronize(s));
  double total = 0;
  for (int i = 0; i < 100; ++i) {
    KG_CUDA_CHECK(cudaEventRecord(start.get(), s));
    op.launch(s);
    KG_CUDA_CHECK(cudaEventRecord(stop.get(), s));
    KG_CUDA_CHECK(cudaEventSynchronize(stop.get()));
    float ms = 0;
    KG_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    total += ms;
  }
  return 1000.0 * total / 100.0;
}

double do_bench_loop(bench_op& op, cudaStream_t s) {
  device_buffer cache(256u << 20);
  cuda_event e0, e1;
  KG_CUDA_CHECK(cudaEventRecord(e0.get(), s));
  for (int i = 0; i < 5; ++i) {
    KG_CUDA_CHECK(cudaMemsetAsync(cache.get(), 0, cache.size(), s));
    op.launch(s);
  }
  KG_CUDA_CHECK(cudaEventRecord(e1.get(), s));
  KG_CUDA_CHECK(cudaEventSynchronize(e1.get()));
  float est_ms = 0;
  KG_CUDA_CHECK(cudaEventElapsedTime(&est_ms, e0.get(), e1.get()));
  est_ms /= 5;
  const int warmup = std::max(1, static_cast<int>(25.0 / est_ms));
  const int rep = std::max(1, static_cast<int>(100.0 / est_ms));
  for (int i = 0; i < warmup; ++i)
    op.launch(s);
  std::vector<cuda_event> starts(static_cast<std::size_t>(rep)),
      ends(static_cast<std::size_t>(rep));
  for (int i = 0; i < rep; ++i) {
    KG_CUDA_CHECK(cudaMemsetAsync(cache.get(), 0, cache.size(), s));
    KG_CUDA_CHECK(cudaEventRecord(starts[i].get(), s));
    op.launch(s);
    KG_CUDA_CHECK(cudaEventRecord(ends[i].get(), s));
  }
  KG_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<double> t;
  for (int i = 0; i < rep; ++i) {
    float ms = 0;
    KG_CUDA_CHECK(cudaEventElapsedTime(&ms, starts[i].get(), ends[i].get()));
    t.push_back(1000.0 * ms);
  }
  return median(t);
}

// Host cost of each call the harness makes per sample (1000 repetitions, medians), and the
// per-sample enqueue time of the events backend with CUPTI auditing off and on.
int host_breakdown() {
  cuda_stream stream;
  const cudaStream_t s = stream.get();
  int device = 0, l2 = 0;
  KG_CUDA_CHECK(cudaGetDevice(&device));
  KG_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  device_buffer flush(2 * static_cast<std::size_t>(l2)), seq(4);
  KG_CUDA_CHECK(cudaMemset(seq.get(), 0, 4));
  mapped_host<std::array<clock_probe, 2>> probes;
  mapped_host<int> flag;
  cuda_event e;
  // The harness's per-sample flush (fill + discard), launched as a graph.
  cuda_graph_exec prefix;
  {
    cudaGraph_t g = nullptr;
    KG_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    launch_l2_flush(flush.get(), flush.size(), static_cast<unsigned*>(seq.get()), 528, s);
    KG_CUDA_CHECK(cudaStreamEndCapture(s, &g));
    prefix.adopt(g);
  }
  const nvml_session nvml;
  std::map<std::string, std::vector<double>> t;
  auto timed = [&](const char* what, auto&& f) {
    const auto a = std::chrono::steady_clock::now();
    f();
    t[what].push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count());
  };
  for (int i = 0; i < 1000; ++i) {
    *flag.host() = 1; // the blocking kernel returns at once
    timed("flush launched directly (2 kernels)", [&] {
      launch_l2_flush(flush.get(), flush.size(), static_cast<unsigned*>(seq.get()), 528, s);
    });
    std::size_t lim = 0;
    timed("cudaDeviceGetLimit",
          [&] { KG_CUDA_CHECK(cudaDeviceGetLimit(&lim, cudaLimitPersistingL2CacheSize)); });
    timed("blocking kernel launch", [&] {
      launch_blocking_kernel(flag.device(), 1'000'000'000ull, &probes.device()->data()[0], s);
    });
    timed("cudaEventRecord", [&] { KG_CUDA_CHECK(cudaEventRecord(e.get(), s)); });
    timed("clock probe launch",
          [&] { launch_clock_probe(&probes.device()->data()[1], 10'000, s); });
    KG_CUDA_CHECK(cudaStreamSynchronize(s));
    timed("flush graph launch", [&] { KG_CUDA_CHECK(cudaGraphLaunch(prefix.get(), s)); });
    KG_CUDA_CHECK(cudaStreamSynchronize(s));
    if (nvml.available()) timed("NVML sample (not in host_us)", [&] { (void)nvml.sample(0); });
  }
  std::cout << "Host cost per call (median of 1000, us; CUPTI off):\n";
  for (auto& [k, v] : t)
    std::cout << "  " << std::left << std::setw(28) << k << std::right << std::fixed
              << std::setprecision(2) << median(v) << "\n";
  auto op = make_bench_op("softmax");
  const char* label[] = {"events backend, CUPTI audit off", "events backend, CUPTI audit on ",
                         "cupti backend                  ", "counters backend, audit on     "};
  for (int k = 0; k < 4; ++k) {
    timing_options o;
    o.trace_activity = k > 0;
    o.backend = k == 2   ? timing_backend::cupti
                : k == 3 ? timing_backend::counters
                         : timing_backend::events;
    o.max_wall_seconds = 2;
    std::unique_ptr<gpu_timer> timer;
    try {
      timer = std::make_unique<gpu_timer>(o);
    } catch (const timing_error& e) {
      std::cout << label[k] << ": " << e.what() << "\n";
      continue;
    }
    const auto r = timer->measure([&](cudaStream_t st) { op->launch(st); });
    // Counters: the harness part includes the range profiler's per-sample set-up (SetConfig,
    // Start, Stop); wall per sample adds its decode and evaluation.
    std::cout << label[k] << ": harness enqueue " << std::setprecision(2) << r.host_us_median
              << " us/sample untraced, " << r.host_us_traced_median << " us traced ("
              << r.traced_samples << " of " << r.samples.size() << " samples traced), wall "
              << 1e6 * r.wall_seconds / static_cast<double>(r.samples.size()) << " us/sample\n";
  }
  return 0;
}

int child(const std::string& method) {
  cuda_stream stream;
  for (const auto& name : bench_op_names()) {
    const bool kg = method == "kernelgate" || method == "kg-cupti" || method == "kg-counters";
    // kernelgate times rotating input sets (as its honest timing does); the peers' loops, one.
    auto op = make_bench_op(name, kg ? kg_input_sets : 1);
    double med = 0, host = 0, modal = 0;
    std::size_t n = 0;
    std::string per_set;
    if (kg) {
      timing_options o; // the defaults a user gets, but for a shorter wall-time cap
      o.max_wall_seconds = 4;
      o.backend = method == "kg-cupti"      ? timing_backend::cupti
                  : method == "kg-counters" ? timing_backend::counters
                                            : timing_backend::events;
      timing_result r;
      try {
        gpu_timer t(o);
        r = t.measure([&](cudaStream_t s) { op->launch(s); });
      } catch (const timing_error& e) {
        // No row for this op: the table shows n/a, the reason goes to the log.
        std::cerr << method << " " << name << ": " << e.what() << "\n";
        continue;
      }
      med = r.summary.median;
      host = r.host_us_median;
      // The mean SM clock measured on the device over the kept samples (not the 15 MHz-binned
      // modal clock): a process-to-process shift in a compute-bound kernel's time shows here
      // when the clock is its cause.
      double sum = 0;
      int with = 0;
      for (const auto& smp : r.samples)
        if (!smp.discarded && smp.sm_mhz > 0) {
          sum += smp.sm_mhz;
          ++with;
        }
      modal = with ? sum / with : r.modal_mhz;
      n = r.kept_us.size();
      // Call i ran input set i % sets: one call in prepare(), then the warm-ups, then samples.
      std::vector<std::vector<double>> by_set(kg_input_sets);
      for (std::size_t j = 0; j < r.samples.size(); ++j)
        if (!r.samples[j].discarded)
          by_set[(1 + static_cast<std::size_t>(r.warmup_samples) + j) % kg_input_sets].push_back(
              r.samples[j].gpu_us);
      std::ostringstream o2;
      o2 << std::fixed << std::setprecision(2);
      for (std::size_t k = 0; k < by_set.size(); ++k)
        o2 << (k ? "," : "") << (by_set[k].empty() ? 0.0 : median(by_set[k]));
      per_set = o2.str();
    } else if (method == "kb") {
      med = kernelbench_loop(*op, stream.get());
    } else if (method == "dobench") {
      med = do_bench_loop(*op, stream.get());
    } else if (method == "ncu") {
      // Which kernel is which op, for scripts/gpu_timing_verify.sh (ncu passes it through).
      std::cout << "kg-op " << name << " " << op->kernel_regex() << std::endl;
      for (int i = 0; i < 23; ++i) {
        op->launch(stream.get());
        KG_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
      }
      continue;
    } else {
      std::cerr << "unknown method " << method << "\n";
      return 2;
    }
    std::cout << name << " " << std::setprecision(9) << med << " " << host << " " << modal << " "
              << n << " " << (per_set.empty() ? "-" : per_set) << std::endl;
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 2 && args[0] == "--child" && args[1] == "host") return host_breakdown();
  if (args.size() == 2 && args[0] == "--child") return child(args[1]);
  int rounds = 8;
  if (args.size() == 2 && args[0] == "--rounds") rounds = std::stoi(args[1]);
  const std::vector<std::string> methods = {"kernelgate", "kg-cupti", "kg-counters", "kb",
                                            "dobench"};
  const std::map<std::string, std::string> column = {{"kernelgate", "kg"},
                                                     {"kg-cupti", "kgC"},
                                                     {"kg-counters", "kgN"},
                                                     {"kb", "KB"},
                                                     {"dobench", "db"}};
  std::map<std::string, std::map<std::string, std::vector<double>>> med; // op -> method -> runs
  std::map<std::string, std::map<std::string, std::vector<std::string>>> detail;
  std::map<std::string, std::map<std::string, std::vector<double>>> host; // op -> method
  for (int r = 0; r < rounds; ++r) {
    // Rotate the method order every round so no method always runs first on a cold GPU.
    for (std::size_t k = 0; k < methods.size(); ++k) {
      const std::string& m = methods[(k + r) % methods.size()];
      const std::string cmd = std::string(argv[0]) + " --child " + m;
      FILE* p = popen(cmd.c_str(), "r");
      if (!p) return 4;
      char op[64], sets[256];
      double v = 0, h = 0, mhz = 0, n = 0;
      while (std::fscanf(p, "%63s %lf %lf %lf %lf %255s", op, &v, &h, &mhz, &n, sets) == 6) {
        med[op][m].push_back(v);
        if (m != "kb" && m != "dobench") host[op][m].push_back(h); // kernelgate backends
        std::ostringstream d;
        d << std::fixed << std::setprecision(2) << v;
        if (mhz > 0) d << "@" << std::setprecision(1) << mhz << std::setprecision(2) << "/" << n;
        if (std::string(sets) != "-") d << "[" << sets << "]";
        detail[op][m].push_back(d.str());
      }
      if (pclose(p) != 0) {
        std::cerr << "child " << m << " failed\n";
        return 4;
      }
    }
  }
  auto cv = [](const std::vector<double>& x) {
    const auto s = summarize(x);
    // Identical medians (CUPTI's 32 ns timestamp steps) are a CV of exactly 0, not rounding dust.
    return std::adjacent_find(x.begin(), x.end(), std::not_equal_to<>()) == x.end()
               ? 0.0
               : s.stdev / s.mean;
  };
  // Methods without a result (e.g. counters where they cannot be read) print n/a.
  auto cell = [](const std::vector<double>& x, auto f, int width, const char* unit) {
    std::ostringstream c, out;
    if (x.empty())
      c << "n/a";
    else
      c << std::fixed << std::setprecision(2) << f(x) << unit;
    out << std::setw(width) << c.str();
    return out.str();
  };
  auto med_of = [](const std::vector<double>& x) { return median(x); };
  auto cv_pct = [&](const std::vector<double>& x) { return 100 * cv(x); };
  std::cout << "Timing repeatability: median of each method's per-process result, and the CV of "
               "that result across "
            << rounds
            << " fresh processes (kg: kernelgate, events backend; kgC: kernelgate, CUPTI backend; "
               "kgN: kernelgate, hardware-counter backend, ncu's gpu__time_duration; KB: "
               "KernelBench loop; db: do_bench loop)\n";
  std::cout << std::left << std::setw(11) << "op" << std::right;
  for (const auto& meth : methods)
    std::cout << std::setw(10) << column.at(meth) + " us" << std::setw(9)
              << column.at(meth) + " CV";
  std::cout << "\n";
  for (const auto& name : bench_op_names()) {
    std::cout << std::left << std::setw(11) << name << std::right;
    for (const auto& meth : methods)
      std::cout << cell(med[name][meth], med_of, 10, "") << cell(med[name][meth], cv_pct, 9, "%");
    std::cout << "\n";
  }
  // The ratio of CVs (how much steadier than do_bench) and the harness's host cost.
  std::cout << "\n"
            << std::left << std::setw(11) << "op" << std::right << std::setw(10) << "db/kg"
            << std::setw(10) << "db/kgC" << std::setw(10) << "db/kgN" << std::setw(10) << "kg host"
            << std::setw(10) << "kgC host" << std::setw(10) << "kgN host"
            << "  (CV ratios; host: harness enqueue us per sample)\n";
  for (const auto& name : bench_op_names()) {
    auto& m = med[name];
    std::cout << std::left << std::setw(11) << name << std::right;
    for (const char* k : {"kernelgate", "kg-cupti", "kg-counters"}) {
      std::ostringstream c;
      if (m[k].empty() || m["dobench"].empty())
        c << "n/a";
      else
        c << std::fixed << std::setprecision(2) << cv(m["dobench"]) / cv(m[k]) << "x";
      std::cout << std::setw(10) << c.str();
    }
    for (const char* k : {"kernelgate", "kg-cupti", "kg-counters"})
      std::cout << cell(host[name][k], med_of, 10, "");
    std::cout << "\n";
  }
  // One line per op for scripts/gpu_timing_verify.sh, which sets them beside ncu's durations.
  for (const auto& name : bench_op_names())
    if (!med[name]["kg-counters"].empty())
      std::cout << "kgN-median " << name << " " << std::fixed << std::setprecision(3)
                << median(med[name]["kg-counters"]) << "\n";
  std::cout
      << "\nPer process (median us, and for kernelgate @modal MHz/kept samples), in run order:\n";
  for (const auto& name : bench_op_names())
    for (const auto& meth : methods) {
      std::cout << std::left << std::setw(11) << name << std::setw(11) << meth;
      for (const auto& d : detail[name][meth])
        std::cout << " " << d;
      std::cout << "\n";
    }
  return 0;
}
