// Speed of the audit path on the CPU: the whole `audit layernorm-affine --backend cpu` (target:
// under 2 s wall on a CPU machine) and its building blocks.
#include <cmath>
#include <filesystem>
#include <sstream>
#include <unistd.h>
#include <utility>

#include <benchmark/benchmark.h>

#include "base/sha256.h"
#include "kernels/layernorm_backend.h"
#include "oracles/comparators.h"
#include "oracles/layernorm_oracle.h"
#include "reports/remove_tree.h"
#include "suite/cli.h"

using namespace kg;

static void bm_full_cpu_audit(benchmark::State& state) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("kg_bench_" + std::to_string(getpid()));
  for (auto _ : state) {
    std::ostringstream out, err;
    const int rc = kernelgate_main(
        {"kernelgate", "audit", "layernorm-affine", "--backend", "cpu", "--out", dir.string()}, out,
        err);
    if (rc != 0) state.SkipWithError(err.str().c_str());
  }
  kg::remove_tree(dir);
}
BENCHMARK(bm_full_cpu_audit)->Unit(benchmark::kMillisecond)->Iterations(3);

static void bm_torch_reference_4x127(benchmark::State& state) {
  auto backend = make_torch_layernorm_backend(half_norm_path::automatic);
  const auto in = draw_layernorm_inputs({4, 127, dtype::float32, 42});
  for (auto _ : state)
    benchmark::DoNotOptimize(backend->run(affine_formula::reference, in, 1e-5));
}
BENCHMARK(bm_torch_reference_4x127)->Unit(benchmark::kMicrosecond);

static void bm_oracle_4x127(benchmark::State& state) {
  const auto in = draw_layernorm_inputs({4, 127, dtype::float32, 42});
  for (auto _ : state)
    benchmark::DoNotOptimize(layernorm_oracle_fp64(in, 1e-5));
}
BENCHMARK(bm_oracle_4x127)->Unit(benchmark::kMicrosecond);

static void bm_sol_checker_4x127(benchmark::State& state) {
  const auto in = draw_layernorm_inputs({4, 127, dtype::float32, 42});
  const auto o = layernorm_oracle_fp64(in, 1e-5).cast(dtype::float32);
  for (auto _ : state)
    benchmark::DoNotOptimize(compare_matched_ratio(o, o, 0.01, 0.01, 0.99));
}
BENCHMARK(bm_sol_checker_4x127)->Unit(benchmark::kMicrosecond);

static void bm_sha256_1mib(benchmark::State& state) {
  std::vector<std::byte> data(1 << 20, std::byte{7});
  for (auto _ : state)
    benchmark::DoNotOptimize(sha256_hex(std::span<const std::byte>(data)));
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(data.size()));
}
BENCHMARK(bm_sha256_1mib)->Unit(benchmark::kMicrosecond);

// Judging one output as the audit does: 4M float32 elements (a relu-sized output is 16M) against
// the fp64 oracle with compare_allclose, beside the same loop read through host_tensor::at (a
// dtype switch per element, as scan read before it dispatched once per tensor).
static std::pair<kg::host_tensor, kg::host_tensor> judged_pair() {
  constexpr std::int64_t n = 4 << 20;
  kg::host_tensor oracle(kg::dtype::float64, {n}), out(kg::dtype::float32, {n});
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = std::sin(0.001 * static_cast<double>(i));
    oracle.set(i, v);
    out.set(i, v + 1e-7);
  }
  return {std::move(oracle), std::move(out)};
}

static void bm_compare_allclose_4m(benchmark::State& state) {
  const auto [oracle, out] = judged_pair();
  for (auto _ : state)
    benchmark::DoNotOptimize(
        kg::compare_allclose(oracle, out, 1e-5, 1e-5, kg::tolerance_side::reference));
}
BENCHMARK(bm_compare_allclose_4m)->Unit(benchmark::kMillisecond);

static void bm_per_element_at_4m(benchmark::State& state) {
  const auto [oracle, out] = judged_pair();
  for (auto _ : state) {
    std::int64_t bad = 0;
    for (std::int64_t i = 0; i < oracle.numel(); ++i)
      bad += std::fabs(oracle.at(i) - out.at(i)) > 1e-5 + 1e-5 * std::fabs(oracle.at(i));
    benchmark::DoNotOptimize(bad);
  }
}
BENCHMARK(bm_per_element_at_4m)->Unit(benchmark::kMillisecond);

// The audit's witness plan after a mutant's first disagreement needs pass or fail only: a
// passing output is scanned whole either way, a wrong one (here every element) stops at its
// first element outside.
static void bm_first_mismatch_passing_4m(benchmark::State& state) {
  const auto [oracle, out] = judged_pair();
  for (auto _ : state)
    benchmark::DoNotOptimize(
        kg::first_allclose_mismatch(oracle, out, 1e-5, 1e-5, kg::tolerance_side::reference));
}
BENCHMARK(bm_first_mismatch_passing_4m)->Unit(benchmark::kMillisecond);

static std::pair<kg::host_tensor, kg::host_tensor> wrong_pair() {
  auto [oracle, out] = judged_pair();
  for (std::int64_t i = 0; i < out.numel(); ++i)
    out.set(i, 0.0); // a mutant's output: zeros against sin(0.001 i), wrong from element 1
  return {std::move(oracle), std::move(out)};
}

static void bm_compare_allclose_wrong_4m(benchmark::State& state) {
  const auto [oracle, out] = wrong_pair();
  for (auto _ : state)
    benchmark::DoNotOptimize(
        kg::compare_allclose(oracle, out, 1e-5, 1e-5, kg::tolerance_side::reference));
}
BENCHMARK(bm_compare_allclose_wrong_4m)->Unit(benchmark::kMillisecond);

static void bm_first_mismatch_wrong_4m(benchmark::State& state) {
  const auto [oracle, out] = wrong_pair();
  for (auto _ : state)
    benchmark::DoNotOptimize(
        kg::first_allclose_mismatch(oracle, out, 1e-5, 1e-5, kg::tolerance_side::reference));
}
BENCHMARK(bm_first_mismatch_wrong_4m)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
