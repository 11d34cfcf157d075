// Speed of `kernelgate fastp`: 10,000 records scored in under 1 s, the whole path (read and parse
// the files, score all six p values, build and print the report). Inputs are generated once per
// benchmark into a temp folder: KernelBench's eval_results.json + baseline_time_torch.json, and a
// kernelgate eval result with speedup intervals (so the noise-aware count and near-ties run).
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "reports/fast_p.h"
#include "reports/remove_tree.h"
#include "suite/cli.h"
#include "base/rng.h"

using namespace kg;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr int problems = 10000;

fs::path bench_dir() {
  const auto d = fs::temp_directory_path() / ("kg_bench_fastp_" + std::to_string(getpid()));
  fs::create_directories(d);
  return d;
}

void write(const fs::path& p, const json& j) {
  std::ofstream(p) << j.dump();
}

// 2% of problems absent from eval_results (missing), 1% without a baseline entry (excluded), 70%
// of the rest correct; runtimes and baselines log-normal around 1 ms, so speedups straddle every
// p in {0, 0.5, 0.8, 1, 1.5, 2}.
struct kernelbench_files {
  fs::path eval, baseline;
};
kernelbench_files make_kernelbench(const fs::path& dir) {
  rng r(11, 3);
  json eval = json::object(), level = json::object();
  for (int id = 1; id <= problems; ++id) {
    const double base = std::exp(0.5 * r.normal()), run = std::exp(0.5 * r.normal());
    const double u = r.uniform01();
    if (u >= 0.01)
      level[std::to_string(id) + "_Problem" + std::to_string(id) + ".py"] = {
          {"mean", base},      {"std", 0.01 * base},        {"min", base},       {"max", base},
          {"num_trials", 100}, {"hardware", "NVIDIA H200"}, {"device", "cuda:0"}};
    if (u < 0.03 && u >= 0.01) continue; // missing from eval_results
    const bool correct = r.uniform01() < 0.7;
    eval[std::to_string(id)] = json::array({{{"sample_id", 0},
                                             {"compiled", true},
                                             {"correctness", correct},
                                             {"metadata", json::object()},
                                             {"runtime", correct ? run : -1.0},
                                             {"runtime_stats", json::object()}}});
  }
  kernelbench_files f{dir / "eval_results.json", dir / "baseline_time_torch.json"};
  write(f.eval, eval);
  write(f.baseline, json{{"level1", level}});
  return f;
}

fs::path make_kernelgate_eval(const fs::path& dir) {
  rng r(12, 3);
  json intended = json::array(), records = json::array();
  for (int i = 0; i < problems; ++i) {
    const std::string task = "task" + std::to_string(i);
    intended.push_back(task);
    const double u = r.uniform01();
    if (u < 0.02) continue; // no record: missing
    const double base_us = 1000 * std::exp(0.5 * r.normal());
    json rec = {{"type", "evaluation"},
                {"id", "eval/" + task + "/cand"},
                {"task", task},
                {"candidate", "cand"},
                {"baseline_us", base_us}};
    if (r.uniform01() < 0.7) {
      const double cand_us = 1000 * std::exp(0.5 * r.normal()), s = base_us / cand_us;
      rec.update({{"status", "PASSED"},
                  {"status_reason", ""},
                  {"candidate_us", cand_us},
                  {"speedup", s},
                  {"speedup_ci95", {0.97 * s, 1.03 * s}}});
    } else {
      rec.update({{"status", "INCORRECT_NUMERICAL"}, {"status_reason", "max abs err 0.1"}});
    }
    records.push_back(std::move(rec));
  }
  const auto p = dir / "eval_result.json";
  write(p, {{"schema", "kernelgate.result/1"},
            {"kind", "eval"},
            {"created", "2026-03-01T00:00:00Z"},
            {"argv", {"kernelgate", "eval"}},
            {"environment", json::object()},
            {"config", {{"intended_tasks", intended}}},
            {"records", records},
            {"summary", {{"status", "complete"}}}});
  return p;
}

void run_cli(benchmark::State& state, std::vector<std::string> args, const fs::path& dir) {
  std::size_t bytes = 0;
  for (auto _ : state) {
    std::ostringstream out, err;
    if (kernelgate_main(args, out, err) != 0) {
      state.SkipWithError(err.str().c_str());
      break;
    }
    bytes = out.str().size();
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["records"] = problems;
  state.counters["report_bytes"] = static_cast<double>(bytes);
  kg::remove_tree(dir);
}

} // namespace

static void bm_fastp_kernelbench_files(benchmark::State& state) {
  const auto dir = bench_dir();
  const auto f = make_kernelbench(dir);
  std::vector<std::string> args = {"kernelgate", "fastp", f.eval.string(), "--baseline",
                                   f.baseline.string()};
  if (state.range(0)) args.push_back("--json");
  state.SetLabel(state.range(0) ? "json" : "text");
  run_cli(state, args, dir);
}
BENCHMARK(bm_fastp_kernelbench_files)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

static void bm_fastp_kernelgate_eval(benchmark::State& state) {
  const auto dir = bench_dir();
  const auto f = make_kernelgate_eval(dir);
  std::vector<std::string> args = {"kernelgate", "fastp", f.string()};
  if (state.range(0)) args.push_back("--json");
  state.SetLabel(state.range(0) ? "json" : "text");
  run_cli(state, args, dir);
}
BENCHMARK(bm_fastp_kernelgate_eval)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// Scoring alone (no parsing or printing): six p values over 10,000 tasks.
static void bm_fastp_score_only(benchmark::State& state) {
  rng r(13, 3);
  std::vector<task_outcome> tasks(problems);
  for (int i = 0; i < problems; ++i) {
    auto& t = tasks[i];
    t.task = std::to_string(i);
    t.evaluated = r.uniform01() > 0.02;
    t.correct = t.evaluated && r.uniform01() < 0.7;
    t.baseline_ms = std::exp(0.5 * r.normal());
    if (t.correct) t.candidate_ms = std::exp(0.5 * r.normal());
  }
  for (auto _ : state)
    for (const double p : {0.0, 0.5, 0.8, 1.0, 1.5, 2.0})
      benchmark::DoNotOptimize(score_fast_p(tasks, p));
  state.counters["records"] = problems;
}
BENCHMARK(bm_fastp_score_only)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
