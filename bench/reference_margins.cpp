// How close a correct float implementation comes to the strict checker's bound, per task and input
// regime: the task's LibTorch reference, run on the CPU in the task's dtypes, judged as `kernelgate
// eval --protocol strict` judges a candidate (every element within atol + rtol x |fp64 oracle|,
// the regime's own tolerance where it has one, plus, in every regime but normal, the condition
// term of input moves alone: without its floor at this same reference's error, which would pass
// the reference by construction). Over SEEDS draws per shape and regime; prints the worst ratio
// |ref - oracle| / bound of each task and regime whose worst passes HALF of its bound, every draw
// that fails, and a summary. A draw that fails is a false rejection in waiting: a GPU kernel as
// accurate as LibTorch's can fail it too. Needs no GPU; uses every core.
//
//   kg_bench_reference_margins [--tasks GLOB] [--seeds N] [--seed S]
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>

#include "reports/remove_tree.h"
#include "sandbox/trial_cache.h"
#include "suite/task_catalog.h"

using namespace kg;

namespace {

task_tolerance tolerance_in(const task_def& t, dtype type, const regime_spec& r) {
  if (const auto it = r.tolerance.find(type); it != r.tolerance.end())
    return {it->second.atol, it->second.rtol};
  return t.tolerance.count(type) ? t.tolerance.at(type) : task_tolerance{0, 0};
}

// The worst |ref - oracle| / bound over the output's elements (infinite where the bound is zero
// and they differ, or the reference is not finite where the oracle is).
double worst_ratio(const host_tensor& oracle, const host_tensor& ref, const task_tolerance& tol,
                   const host_tensor* extra) {
  double worst = 0;
  for (std::int64_t i = 0; i < oracle.numel(); ++i) {
    const double o = oracle.at(i), c = ref.at(i);
    if (std::isnan(o) && std::isnan(c)) continue;
    const double bound = tol.atol + (extra ? extra->at(i) : 0.0) + tol.rtol * std::fabs(o);
    const double d = std::fabs(o - c);
    if (d == 0) continue;
    worst = std::max(worst, std::isfinite(d) && bound > 0 ? d / bound : INFINITY);
  }
  return worst;
}

} // namespace

int main(int argc, char** argv) {
  std::string glob = std::string(KG_SOURCE_DIR) + "/data/tasks";
  int seeds = 4;
  std::uint64_t first_seed = 1000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--tasks") glob = argv[i + 1];
    if (a == "--seeds") seeds = std::max(1, std::atoi(argv[i + 1]));
    if (a == "--seed") first_seed = std::strtoull(argv[i + 1], nullptr, 10);
  }
  const auto tasks = load_tasks(glob);
  const auto dir = std::filesystem::temp_directory_path() / "kg-bench-reference-margins";
  remove_tree(dir);
  std::cout << std::unitbuf << "seeds " << first_seed << ".." << first_seed + seeds - 1
            << " per shape and regime; the LibTorch reference on the CPU against the strict bound\n"
            << std::left << std::setw(34) << "task" << std::setw(14) << "regime" << std::right
            << std::setw(8) << "draws" << std::setw(9) << "failed" << std::setw(12) << "worst ratio"
            << std::setw(12) << "full term"
            << "\n";
  int draws_all = 0, failed_all = 0, tasks_failing = 0, failed_full_all = 0;
  {
    trial_cache cache(dir);
    for (const auto& t : tasks) {
      std::vector<trial_key> keys;
      for (const auto& shape : t.shapes)
        for (std::size_t r = 0; r < std::max<std::size_t>(1, t.regimes.size()); ++r)
          for (int s = 0; s < seeds; ++s) {
            task_input_regime regime;
            regime.strict_regime = t.regimes.empty() ? -1 : static_cast<int>(r);
            keys.push_back({&t, &shape, first_seed + static_cast<std::uint64_t>(s), regime, true});
          }
      for (const auto& k : keys)
        cache.prefetch(k);
      bool task_failed = false;
      std::map<std::string, std::pair<int, int>> counts; // regime: draws, failed
      std::map<std::string, int> failed_full;
      std::map<std::string, double> worst;
      for (const auto& k : keys) {
        const auto d = cache.take(k);
        if (!d->reference_ran || !d->reference_error.empty()) break; // no reference to judge
        const regime_spec spec = t.regimes.empty()
                                     ? regime_spec{}
                                     : t.regimes[static_cast<std::size_t>(k.regime.strict_regime)];
        const std::string name = spec.name();
        double w = 0;
        std::vector<host_tensor> moves; // the condition term without the reference floor
        for (std::size_t o = 0; o < d->oracle.size(); ++o) {
          const auto tol = tolerance_in(t, t.outputs[o].type, spec);
          double r = worst_ratio(d->oracle[o], d->reference[o], tol, nullptr);
          if (r > 1 && d->has_condition_term()) {
            if (moves.empty())
              moves = condition_tolerance(t, *k.shape, d->inputs, d->oracle, k.seed);
            if (moves.size() > o && !moves[o].shape.empty())
              r = worst_ratio(d->oracle[o], d->reference[o], tol, &moves[o]);
          }
          w = std::max(w, r);
        }
        double full = 0; // against the full term, floor included
        if (w > 1)
          for (std::size_t o = 0; o < d->oracle.size(); ++o)
            full = std::max(
                full,
                worst_ratio(d->oracle[o], d->reference[o], tolerance_in(t, t.outputs[o].type, spec),
                            d->extra_atol().size() > o && !d->extra_atol()[o].shape.empty()
                                ? &d->extra_atol()[o]
                                : nullptr));
        failed_full[name] += full > 1 ? 1 : 0;
        ++counts[name].first;
        worst[name] = std::max(worst[name], w);
        if (w > 1) {
          ++counts[name].second;
          task_failed = true;
          std::cout << "  FAILS " << t.id << " shape '" << k.shape->name << "' " << name << " seed "
                    << k.seed << ": worst ratio " << w << "\n";
        }
      }
      cache.forget(keys);
      for (const auto& [name, c] : counts) {
        draws_all += c.first;
        failed_all += c.second;
        failed_full_all += failed_full[name];
        if (worst[name] > 0.5)
          std::cout << std::left << std::setw(34) << t.id << std::setw(14) << name << std::right
                    << std::setw(8) << c.first << std::setw(9) << c.second << std::setw(11)
                    << std::setprecision(3) << worst[name] << std::setw(12) << failed_full[name]
                    << "\n";
      }
      tasks_failing += task_failed ? 1 : 0;
    }
  }
  remove_tree(dir);
  std::cout << "draws judged: " << draws_all << ", failed: " << failed_all << " (" << tasks_failing
            << " tasks); against the full term: " << failed_full_all << "\n";
  return 0;
}
