// The suite runner's loop apart from the GPU (issue: the nightly regression suite): workloads in
// run order, each measured by an executor (the GPU session in `kernelgate run`, a fake in the
// tests), its record built and streamed, a line or a redrawn progress bar per workload, and the
// bookkeeping of --resume (what finished is skipped; the workload in flight when the run died
// has no record and runs again).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/result_writer.h"
#include "suite/progress_meter.h"
#include "suite/workload_result.h"
#include "workloads/suite_def.h"

namespace kg {

// What an executor measured for one workload.
struct measured_workload {
  std::vector<double> samples; // the primary metric, one value per sample, in its unit
  // What each sample was measured on, when samples differ by input (serving: the arrival seed):
  // empty, or one key per sample. `compare` pairs two runs' samples by key.
  std::vector<std::uint64_t> sample_keys;
  std::vector<workload_gate> gates;
  // The speed-of-light bound in the metric's unit (time metrics) and what it was computed from
  // (the ceiling measured); none for metrics without one.
  std::optional<double> sol_bound;
  nlohmann::json sol_detail = nlohmann::json::object();
  nlohmann::json extra = nlohmann::json::object(); // anything else worth keeping
};

using workload_executor = std::function<measured_workload(const suite_workload&)>;
// The implementation and code hash of each role the workload names.
using roles_fn = std::function<nlohmann::json(const suite_workload&)>;

// The record of a measured workload: samples, median with its 95% bootstrap interval, SOL
// fraction (bound / median for "lower" metrics), gates, roles.
nlohmann::json make_suite_record(const suite_workload& w, const measured_workload& m,
                                 const nlohmann::json& roles, double wall_seconds);
// The record of a workload that could not be measured: no samples, the error, and a failed
// "measured" gate (the run's exit then says a gate failed).
nlohmann::json make_error_record(const suite_workload& w, const std::string& error,
                                 const nlohmann::json& roles, double wall_seconds);
bool record_gates_pass(const nlohmann::json& record);

// The ids of the suite_workload records of a resumed run (each once, however often written).
std::set<std::string> finished_ids(const std::vector<nlohmann::json>& records);

// One line per finished workload (not a terminal), or a progress bar redrawn in place with
// counts, elapsed time and ETA (a terminal). The ETA is the remaining workloads' cost_seconds
// scaled by how the finished ones' measured time compared with their estimates.
class suite_progress {
public:
  suite_progress(std::ostream& out, bool terminal, const std::vector<suite_workload>& to_run);
  void begin(const suite_workload& w);
  void end(const suite_workload& w, const nlohmann::json& record, double wall_seconds);
  void finish();
  // Seconds left by the estimate: the remaining cost, scaled by measured / estimated so far.
  double eta_seconds() const;
  static std::string
  result_line(const nlohmann::json& record); // "median [lo, hi] unit, SOL, gates"

private:
  progress_meter meter_;
  std::size_t total_;
};

struct suite_loop_result {
  int measured = 0, skipped = 0, gates_failed = 0, errors = 0;
  bool interrupted = false;
};

// Runs every workload of `ordered` whose id is not in `done`, appending each record to `writer`
// as it finishes. An executor's exception becomes an error record (the next workload still
// runs); interrupted_error (SIGINT/SIGTERM) stops the loop with nothing recorded for the
// workload in flight (a resume re-runs it).
suite_loop_result run_suite_loop(const std::vector<suite_workload>& ordered,
                                 const std::set<std::string>& done, const workload_executor& run,
                                 const roles_fn& roles, result_writer& writer,
                                 suite_progress& progress);

} // namespace kg
