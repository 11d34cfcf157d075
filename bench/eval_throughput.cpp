// Evaluations per GPU-minute (issue: task catalog): `kernelgate eval` over the whole catalog,
// strict protocol, default timing, with COPIES candidates per task -- the task's own kernel, each
// copy made distinct by a comment line so that it is compiled and cached as a candidate of its
// own, the way a batch of model samples arrives. Three runs in one process: compile cache cold
// (an empty cache folder, every CPU core compiling), then warm, then warm with timing off. Prints
// pairs, wall seconds, evaluations per minute and the statuses of each. Needs a GPU; prints why
// and exits 3 without one. The wall clock is the GPU-minute: the GPU is held by the run from start
// to end.
//
//   kg_bench_eval_throughput [--tasks GLOB] [--copies N] [--workers N] [--compare-workers N]
// (--compare-workers: one more warm timed run with that many workers, beside the default)
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/remove_tree.h"
#include "suite/cli.h"
#include "gpu/device_info.h"

using namespace kg;
namespace fs = std::filesystem;

namespace {

// The phase log's lines from byte `from` on: seconds and count per phase, largest first.
void print_phases(const fs::path& log, std::uintmax_t from) {
  std::ifstream in(log);
  in.seekg(static_cast<std::streamoff>(from));
  std::map<std::string, std::pair<double, int>> by;
  long pid = 0;
  std::string name;
  double s = 0;
  while (in >> pid >> name >> s) {
    by[name].first += s;
    ++by[name].second;
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> rows(by.begin(), by.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::cout << "    host phases (seconds summed over threads and processes, count):";
  for (const auto& [n, v] : rows)
    std::cout << " " << n << " " << std::setprecision(2) << v.first << " (" << v.second << ");";
  std::cout << "\n";
}

} // namespace

int main(int argc, char** argv) {
  std::string tasks = std::string(KG_SOURCE_DIR) + "/data/tasks", workers = "0", compare_workers;
  int copies = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--tasks")
      tasks = argv[i + 1];
    else if (a == "--copies")
      copies = std::max(1, std::atoi(argv[i + 1]));
    else if (a == "--workers")
      workers = argv[i + 1];
    else if (a == "--compare-workers")
      compare_workers = argv[i + 1];
  }
  std::cout << std::unitbuf; // each row as it is measured: a run cut short keeps the rows before it
  const auto dev = query_device(0);
  if (!dev.available) {
    std::cerr << "kg_bench_eval_throughput: no GPU: " << dev.reason << "\n";
    return 3;
  }
  ::setenv("KERNELGATE_WORKER", KG_WORKER_BIN, 1); // the slim worker, as kernelgate picks it
  const fs::path root = fs::temp_directory_path() / "kg-bench-eval";
  remove_tree(root);
  // DIR/<task>/copy<k>.cu: candidate copy<k> of the task.
  const fs::path candidates = root / "candidates";
  for (const auto& e : fs::directory_iterator(std::string(KG_SOURCE_DIR) + "/kernels/tasks")) {
    if (e.path().extension() != ".cu") continue;
    std::ifstream in(e.path());
    std::stringstream src;
    src << in.rdbuf();
    fs::create_directories(candidates / e.path().stem());
    for (int k = 0; k < copies; ++k)
      std::ofstream(candidates / e.path().stem() / ("copy" + std::to_string(k) + ".cu"))
          << "// kg_bench_eval_throughput copy " << k << "\n"
          << src.str();
  }
  const std::string cache = (root / "cache").string();
  // Where each run's host time went, by phase, over every process of the run (timing/phase_log.h).
  const fs::path phase_log = root / "phases.log";
  ::setenv("KG_PHASE_LOG", phase_log.c_str(), 1);
  struct run {
    std::string name;
    const char* time;
    std::string workers;
  };
  std::cout << "copies per task: " << copies << ", workers: " << workers
            << " (0: kernelgate's default)\n";
  std::cout << std::left << std::setw(32) << "run" << std::right << std::setw(7) << "pairs"
            << std::setw(8) << "passed" << std::setw(10) << "wall s" << std::setw(11) << "evals/min"
            << "   statuses\n";
  std::vector<run> runs = {{"cold cache, timed", "yes", workers},
                           {"warm cache, timed", "yes", workers}};
  if (!compare_workers.empty())
    runs.push_back({"warm, timed, " + compare_workers + " workers", "yes", compare_workers});
  runs.push_back({"warm cache, correctness only", "no", workers});
  for (const run& r : runs) {
    const fs::path out = root / r.name;
    std::ostringstream o, e;
    std::error_code size_ec;
    const auto log_from = fs::exists(phase_log) ? fs::file_size(phase_log, size_ec) : 0;
    const auto t0 = std::chrono::steady_clock::now();
    const int rc = kernelgate_main({"kernelgate", "eval", "--tasks", tasks, "--candidates",
                                    candidates.string(), "--cache", cache, "--time", r.time,
                                    "--workers", r.workers, "--out", out.string()},
                                   o, e);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::ifstream in(out / "result.json");
    if (!in) {
      std::cout << r.name << ": no result (exit " << rc << "): " << e.str() << "\n";
      continue;
    }
    const auto j = nlohmann::json::parse(in);
    const int pairs = j.at("summary").at("pairs").get<int>();
    const auto& by = j.at("summary").at("by_status");
    std::ostringstream statuses;
    for (const auto& [k, v] : by.items())
      statuses << " " << k << " " << v.get<int>();
    std::cout << std::left << std::setw(32) << r.name << std::right << std::setw(7) << pairs
              << std::setw(8) << by.value("PASSED", 0) << std::setw(10) << std::fixed
              << std::setprecision(1) << wall << std::setw(11) << 60.0 * pairs / wall << "  "
              << statuses.str() << "   (exit " << rc << ")\n";
    if (rc != 0 && rc != 1) std::cerr << e.str();
    // Every pair here is a task's own kernel: anything but PASSED is a false rejection to chase.
    for (const auto& rec : j.at("records"))
      if (rec.value("status", "") != "PASSED")
        std::cout << "    NOT PASSED " << rec.value("id", "") << ": " << rec.value("status", "")
                  << ": " << rec.value("status_reason", "").substr(0, 400) << " worst "
                  << rec.value("detail", nlohmann::json::object())
                         .value("worst_element", nlohmann::json())
                         .dump()
                         .substr(0, 600)
                  << " seed " << j.at("summary").at("seed").value("value", std::uint64_t{0})
                  << "\n";
    // Where the run's time went, summed over pairs: worker seconds per phase (correctness runs
    // overlap on the GPU; timing holds it alone) and, inside timing, the measurements' own walls.
    double check_s = 0, time_s = 0, cand_s = 0, paired_s = 0, torch_s = 0;
    double samples = 0, cand_pairs = 0;
    auto num = [](const nlohmann::json& o, const char* k) {
      return o.is_object() && o.contains(k) && o[k].is_number() ? o[k].get<double>() : 0.0;
    };
    for (const auto& rec : j.at("records")) {
      const auto& d = rec.value("detail", nlohmann::json::object());
      if (d.contains("worker")) check_s += num(d["worker"], "seconds");
      if (d.contains("timing_worker")) time_s += num(d["timing_worker"], "seconds");
      if (!d.contains("timing") || !d["timing"].is_object()) continue;
      const auto& t = d["timing"];
      if (t.contains("candidate")) {
        cand_s += num(t["candidate"], "wall_seconds");
        samples += num(t["candidate"], "samples_taken");
        cand_pairs += 1;
      }
      if (t.contains("paired")) paired_s += num(t["paired"], "wall_seconds");
      if (t.contains("torch_reference")) torch_s += num(t["torch_reference"], "wall_seconds");
    }
    print_phases(phase_log, log_from);
    std::cout << "    worker seconds summed over pairs: correctness " << std::setprecision(1)
              << check_s << " (with timing's input sets loaded and verified), timing " << time_s
              << " (candidate loops " << cand_s << ", ABBA pairs " << paired_s << ", LibTorch "
              << torch_s << "); candidate samples per timed pair "
              << (cand_pairs > 0 ? samples / cand_pairs : 0.0) << "\n";
  }
  return 0;
}
