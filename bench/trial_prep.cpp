// The CPU side of `kernelgate eval`'s strict trials over the catalog, per task: inputs and fp64
// oracle of every planned trial (one draw per input regime per shape, plus the timing sets), and
// separately what the condition term costs where it is forced for every trial of a regime other
// than N(0,1) (eval computes it only for an output outside the task's own tolerance). Single
// thread, so the columns compare side by side in one run; eval spreads trials over every core.
//
//   kg_bench_trial_prep [--tasks GLOB]
#include <chrono>
#include <iomanip>
#include <iostream>

#include "sandbox/sandbox.h"
#include "suite/task_catalog.h"
#include "sandbox/trial_cache.h"

using namespace kg;

int main(int argc, char** argv) {
  std::string glob = std::string(KG_SOURCE_DIR) + "/data/tasks";
  for (int i = 1; i + 1 < argc; i += 2)
    if (std::string(argv[i]) == "--tasks") glob = argv[i + 1];
  std::cout << std::unitbuf << std::left << std::setw(34) << "task" << std::right << std::setw(8)
            << "trials" << std::setw(12) << "trials s" << std::setw(16) << "cond. term s\n";
  double all = 0, all_term = 0;
  std::size_t n = 0;
  for (const auto& task : load_tasks(glob)) {
    sandbox_options opt;
    double base = 0, term = 0;
    const auto keys = planned_trials(task, opt);
    for (const auto& k : keys) {
      const auto t0 = std::chrono::steady_clock::now();
      const auto d = compute_trial(k);
      const auto t1 = std::chrono::steady_clock::now();
      (void)d.extra_atol();
      const auto t2 = std::chrono::steady_clock::now();
      base += std::chrono::duration<double>(t1 - t0).count();
      term += std::chrono::duration<double>(t2 - t1).count();
    }
    std::cout << std::left << std::setw(34) << task.id << std::right << std::setw(8) << keys.size()
              << std::setw(12) << std::fixed << std::setprecision(3) << base << std::setw(14)
              << term << "\n";
    all += base;
    all_term += term;
    n += keys.size();
  }
  std::cout << std::left << std::setw(34) << "total" << std::right << std::setw(8) << n
            << std::setw(12) << all << std::setw(14) << all_term << "\n"
            << "condition term forced on every trial: " << std::setprecision(2)
            << (all + all_term) / all << "x the trials' CPU time\n";
}
