// Repeatability of timing methods, measured side by side (issue: timing and statistics).
// For each op of targets.md section 5, three methods each report a median in 8 fresh processes,
// interleaved round by round: kernelgate's harness, a C++ re-implementation of KernelBench's
// loop (3 warm-ups, 100 event-timed trials, mean, no flush) and of triton's do_bench (25 ms of
// warm-up, 100 ms of repetitions, 256 MB cache zeroed before each, median). It prints per op the
// median and the CV across processes per method, and the ratio of CVs.
//
//   kg_bench_repeatability [--rounds N]          the table
//   kg_bench_repeatability --child METHOD        one process: one line "op median_us host_us"
//   kg_bench_repeatability --child ncu           launches each op 20 times (for ncu to time)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/bench_ops.h"
#include "stats/summary.h"
#include "timing/cuda_raii.h"
#include "timing/device_buffer.h"
#include "timing/gpu_timer.h"

using namespace kg;

namespace {

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

int child(const std::string& method) {
  cuda_stream stream;
  for (const auto& name : bench_op_names()) {
    auto op = make_bench_op(name);
    double med = 0, host = 0;
    if (method == "kernelgate") {
      timing_options o;
      o.max_wall_seconds = 4;
      gpu_timer t(o);
      const auto r = t.measure([&](cudaStream_t s) { op->launch(s); });
      med = r.summary.median;
      host = r.host_us_median;
    } else if (method == "kb") {
      med = kernelbench_loop(*op, stream.get());
    } else if (method == "dobench") {
      med = do_bench_loop(*op, stream.get());
    } else if (method == "ncu") {
      for (int i = 0; i < 23; ++i) {
        op->launch(stream.get());
        KG_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
      }
      continue;
    } else {
      std::cerr << "unknown method " << method << "\n";
      return 2;
    }
    std::cout << name << " " << std::setprecision(9) << med << " " << host << std::endl;
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 2 && args[0] == "--child") return child(args[1]);
  int rounds = 8;
  if (args.size() == 2 && args[0] == "--rounds") rounds = std::stoi(args[1]);
  const std::vector<std::string> methods = {"kernelgate", "kb", "dobench"};
  std::map<std::string, std::map<std::string, std::vector<double>>> med; // op -> method -> runs
  std::map<std::string, std::vector<double>> host;
  for (int r = 0; r < rounds; ++r) {
    // Rotate the method order every round so no method always runs first on a cold GPU.
    for (std::size_t k = 0; k < methods.size(); ++k) {
      const std::string& m = methods[(k + r) % methods.size()];
      const std::string cmd = std::string(argv[0]) + " --child " + m;
      FILE* p = popen(cmd.c_str(), "r");
      if (!p) return 4;
      char op[64];
      double v = 0, h = 0;
      while (std::fscanf(p, "%63s %lf %lf", op, &v, &h) == 3) {
        med[op][m].push_back(v);
        if (m == "kernelgate") host[op].push_back(h);
      }
      if (pclose(p) != 0) {
        std::cerr << "child " << m << " failed\n";
        return 4;
      }
    }
  }
  auto cv = [](const std::vector<double>& x) {
    const auto s = summarize(x);
    return s.stdev / s.mean;
  };
  std::cout << "Timing repeatability: median of each method's per-process result, and the CV of "
               "that result across "
            << rounds << " fresh processes\n";
  std::cout << std::left << std::setw(12) << "op" << std::right << std::setw(14) << "kg median us"
            << std::setw(9) << "kg CV" << std::setw(14) << "KB median us" << std::setw(9) << "KB CV"
            << std::setw(14) << "db median us" << std::setw(9) << "db CV" << std::setw(12)
            << "db/kg CV" << std::setw(14) << "kg host us"
            << "\n";
  for (const auto& name : bench_op_names()) {
    auto& m = med[name];
    const double kg = cv(m["kernelgate"]), kb = cv(m["kb"]), db = cv(m["dobench"]);
    std::cout << std::left << std::setw(12) << name << std::right << std::fixed
              << std::setprecision(2) << std::setw(14) << median(m["kernelgate"]) << std::setw(8)
              << 100 * kg << "%" << std::setw(14) << median(m["kb"]) << std::setw(8) << 100 * kb
              << "%" << std::setw(14) << median(m["dobench"]) << std::setw(8) << 100 * db << "%"
              << std::setw(11) << db / kg << "x" << std::setw(14) << median(host[name]) << "\n";
  }
  return 0;
}
