// Evaluations per GPU-minute (issue: task catalog): `kernelgate eval` over the whole catalog with
// its own kernels as candidates, strict protocol, default timing, three times in one run --
// compile cache cold (an empty cache folder, every CPU core compiling), then warm, then warm with
// timing off -- and prints pairs, wall seconds and evaluations per minute for each. Needs a GPU;
// prints why and exits 3 without one. The wall clock is the GPU-minute here: the GPU is held by
// the run from start to end.
//
//   kg_bench_eval_throughput [--tasks GLOB]
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "reports/remove_tree.h"
#include "suite/cli.h"
#include "timing/device_info.h"

using namespace kg;
namespace fs = std::filesystem;

int main(int argc, char** argv) {
  std::string tasks = std::string(KG_SOURCE_DIR) + "/data/tasks";
  if (argc == 3 && std::string(argv[1]) == "--tasks") tasks = argv[2];
  const auto dev = query_device(0);
  if (!dev.available) {
    std::cerr << "kg_bench_eval_throughput: no GPU: " << dev.reason << "\n";
    return 3;
  }
  ::setenv("KERNELGATE_WORKER", KG_KERNELGATE_BIN, 1);
  const fs::path root = fs::temp_directory_path() / "kg-bench-eval";
  remove_tree(root);
  const std::string cache = (root / "cache").string();
  struct run {
    const char* name;
    const char* time;
  };
  std::cout << std::left << std::setw(34) << "run" << std::right << std::setw(8) << "pairs"
            << std::setw(10) << "passed" << std::setw(12) << "wall s" << std::setw(14)
            << "evals/min"
            << "\n";
  for (const run r : {run{"cold cache, timed", "yes"}, run{"warm cache, timed", "yes"},
                      run{"warm cache, correctness only", "no"}}) {
    const fs::path out = root / r.name;
    std::ostringstream o, e;
    const auto t0 = std::chrono::steady_clock::now();
    const int rc = kernelgate_main({"kernelgate", "eval", "--tasks", tasks, "--candidates",
                                    std::string(KG_SOURCE_DIR) + "/kernels/tasks", "--cache", cache,
                                    "--time", r.time, "--out", out.string()},
                                   o, e);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::ifstream in(out / "result.json");
    const auto j = nlohmann::json::parse(in);
    const int pairs = j.at("summary").at("pairs").get<int>();
    const int passed = j.at("summary").at("by_status").value("PASSED", 0);
    std::cout << std::left << std::setw(34) << r.name << std::right << std::setw(8) << pairs
              << std::setw(10) << passed << std::setw(12) << std::fixed << std::setprecision(1)
              << wall << std::setw(14) << 60.0 * pairs / wall << "   (exit " << rc << ")\n";
    if (rc != 0 && rc != 1) std::cerr << e.str();
  }
  return 0;
}
