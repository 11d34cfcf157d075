// The run history at the nightly's size: 1,000 suite runs of 160 workloads appended to one SQLite
// database (each workload with the sample count of the real H200 nightly run: 3 samples for most
// kernels, 400 for the GEMVs, up to 1,341 for training steps; a serving workload's samples keyed by
// arrival seed), then `kernelgate history FILE --workload ID` timed in-process (open, query,
// print). Target: under 200 ms on the 2-core CPU machine. Prints a table.
//
//   kg_bench_history [--runs N] [--resamples R] [--db FILE] [--keep]
//
// The database (0.8 GB at 1,000 runs, in the current folder by default) is removed at the end
// unless --keep.
//
// --resamples is the bootstrap of each append's decisions (compare's default is 10,000); the query
// reads stored decisions, so it does not depend on it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/rng.h"
#include "reports/result_writer.h"
#include "reports/run_history.h"
#include "suite/cli.h"

using namespace kg;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Sample counts of the 160 workloads of /work/samples/run1 (an H200 nightly), as a histogram.
const std::vector<std::pair<int, int>> sample_count_histogram = {
    {3, 74},   {400, 43}, {1301, 2}, {120, 2}, {100, 2}, {40, 2},  {1341, 1}, {280, 1},  {250, 1},
    {80, 1},   {1251, 1}, {390, 1},  {230, 1}, {50, 1},  {490, 1}, {370, 1},  {1030, 1}, {1190, 1},
    {1180, 1}, {194, 1},  {192, 1},  {172, 1}, {168, 1}, {150, 1}, {110, 1},  {164, 1},  {130, 1},
    {82, 1},   {83, 1},   {63, 1},   {146, 1}, {141, 1}, {116, 1}, {138, 1},  {124, 1},  {93, 1},
    {123, 1},  {105, 1},  {67, 1},   {60, 1},  {46, 1}};

struct workload_shape {
  std::string id;
  int samples;
  bool serving; // p99 ITL in ms, keyed by arrival seed
  double median;
};

std::vector<workload_shape> shapes() {
  std::vector<workload_shape> w;
  for (const auto& [count, n] : sample_count_histogram)
    for (int k = 0; k < n; ++k) {
      const auto i = w.size();
      char id[64];
      const bool serving = count == 40 || count == 50; // the real run's serving sample counts
      std::snprintf(id, sizeof id, "%s.w%03zu", serving ? "serving.p99" : "kernel.bench", i);
      w.push_back({id, count, serving, serving ? 20.0 + static_cast<double>(i) : 1e-6 * (1 + i)});
    }
  return w;
}

json suite_doc(const std::vector<workload_shape>& shapes, int run, rng& r) {
  json records = json::array(), ids = json::array();
  // Every 50th run is 5% slower across the board: the history has SLOWER rows to list.
  const double shift = run % 50 == 49 ? 1.05 : 1.0;
  for (const auto& w : shapes) {
    json samples = json::array(), keys = json::array();
    std::vector<double> sorted;
    for (int s = 0; s < w.samples; ++s) {
      const double v = w.median * shift * (1 + 0.01 * r.normal());
      samples.push_back(v);
      sorted.push_back(v);
      keys.push_back(1000 + s);
    }
    std::sort(sorted.begin(), sorted.end());
    json rec = {{"type", "suite_workload"},
                {"id", w.id},
                {"level", w.serving ? "serving" : "kernel"},
                {"metric",
                 {{"name", w.serving ? "p99_itl_ms" : "kernel_seconds"},
                  {"direction", "lower"},
                  {"unit", w.serving ? "ms" : "s"}}},
                {"samples", std::move(samples)},
                {"estimate", sorted[sorted.size() / 2]},
                {"ci95", {sorted[sorted.size() / 4], sorted[sorted.size() * 3 / 4]}},
                {"gates", {{{"name", "oracle_fp64"}, {"pass", true}, {"detail", "checked"}}}},
                {"extra", {{"timing", {{"modal_sm_mhz", 1980}}}}}};
    if (w.serving) rec["sample_keys"] = std::move(keys);
    records.push_back(std::move(rec));
    ids.push_back(w.id);
  }
  char created[32];
  std::snprintf(created, sizeof created, "2026-%02d-%02dT%02d:00:00Z", 1 + run / 84 % 12,
                1 + run / 3 % 28, run % 3 * 8);
  char revision[41];
  std::snprintf(revision, sizeof revision, "%040x", 0xabc000 + run / 10);
  return {{"schema", result_schema_id},
          {"kind", "suite_run"},
          {"created", created},
          {"finished", created},
          {"argv", {"kernelgate", "run", "--suite", "nightly"}},
          {"environment",
           {{"gpu", {{"name", "NVIDIA H200"}}},
            {"git", {{"revision", revision}, {"dirty", run % 7 == 0}}}}},
          {"config", {{"suite", "nightly"}, {"workloads", ids}, {"order", ids}}},
          {"records", std::move(records)},
          {"summary", {{"status", "complete"}, {"gates_passed", true}, {"workloads", 160}}}};
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace

int main(int argc, char** argv) {
  int runs = 1000, resamples = 200;
  bool keep = false;
  fs::path db = "kg_bench_history.sqlite";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--keep") {
      keep = true;
      continue;
    }
    if (i + 1 >= argc || (a != "--runs" && a != "--resamples" && a != "--db")) {
      std::fprintf(stderr, "usage: kg_bench_history [--runs N] [--resamples N] [--db FILE] [--keep]"
                           " (the database, 0.8 GB at 1,000 runs, is removed unless --keep)\n");
      return 2;
    }
    if (a == "--runs")
      runs = std::stoi(argv[++i]);
    else if (a == "--resamples")
      resamples = std::stoi(argv[++i]);
    else
      db = argv[++i];
  }
  const auto remove_db = [&db] {
    for (const char* suffix : {"", "-wal", "-shm"})
      fs::remove(db.string() + suffix);
  };
  remove_db();
  const auto w = shapes();
  rng r(7, stream_id("bench-history"));
  history_append_options opt;
  opt.compare.resamples = resamples;
  auto h = run_history::open_for_append(db);
  const auto t0 = std::chrono::steady_clock::now();
  double generate = 0;
  std::size_t slower = 0;
  for (int run = 0; run < runs; ++run) {
    const auto g0 = std::chrono::steady_clock::now();
    const auto doc = suite_doc(w, run, r);
    generate += seconds_since(g0);
    slower += h.append(doc, opt).slower;
  }
  const double append = seconds_since(t0) - generate;
  const auto bytes = fs::file_size(db) + fs::file_size(db.string() + "-wal");

  // `kernelgate history FILE --workload ID`: the command in-process, output to a string.
  std::vector<double> times;
  std::size_t lines = 0;
  for (int k = 0; k < 21; ++k) {
    const auto& id = w[static_cast<std::size_t>(k * 7) % w.size()].id;
    std::ostringstream out, err;
    const auto q0 = std::chrono::steady_clock::now();
    const int rc =
        kernelgate_main({"kernelgate", "history", db.string(), "--workload", id}, out, err);
    times.push_back(seconds_since(q0));
    if (rc != 0) {
      std::fprintf(stderr, "history failed: %s", err.str().c_str());
      if (!keep) remove_db();
      return 1;
    }
    const auto text = out.str();
    lines = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
  }
  std::sort(times.begin(), times.end());
  std::printf("runs appended            %d x %zu workloads (%zu SLOWER decisions)\n", runs,
              w.size(), slower);
  std::printf("append                   %.1f s total, %.1f ms per run (bootstrap %d resamples)\n",
              append, 1e3 * append / runs, resamples);
  std::printf("database                 %.0f MB\n", static_cast<double>(bytes) / 1e6);
  std::printf("history --workload ID    median %.1f ms, max %.1f ms over %zu queries (%zu lines "
              "each; target < 200 ms)\n",
              1e3 * times[times.size() / 2], 1e3 * times.back(), times.size(), lines);
  if (!keep) remove_db();
  return times.back() < 0.2 ? 0 : 1;
}
