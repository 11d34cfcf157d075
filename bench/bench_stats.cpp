// Speed of the statistics: 10,000 bootstrap resamples of 1,000 samples must take under 50 ms on
// one CPU core (issue: timing and statistics).
#include <cmath>

#include <benchmark/benchmark.h>

#include "stats/bootstrap.h"
#include "base/rng.h"

using namespace kg;

static std::vector<double> lognormal(std::size_t n) {
  rng r(7, 7);
  std::vector<double> x(n);
  for (auto& v : x)
    v = std::exp(0.1 * r.normal());
  return x;
}

static void bm_bootstrap_median(benchmark::State& state) {
  const auto x = lognormal(1000);
  bootstrap_options o;
  o.resamples = 10000;
  o.method = state.range(0) ? ci_method::bca : ci_method::percentile;
  for (auto _ : state)
    benchmark::DoNotOptimize(bootstrap_median(x, o));
  state.SetLabel(state.range(0) ? "bca" : "percentile");
}
BENCHMARK(bm_bootstrap_median)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

static void bm_bootstrap_ratio_of_medians(benchmark::State& state) {
  const auto x = lognormal(1000), y = lognormal(1000);
  for (auto _ : state)
    benchmark::DoNotOptimize(bootstrap_ratio_of_medians(x, y));
}
BENCHMARK(bm_bootstrap_ratio_of_medians)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
