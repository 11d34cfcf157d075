// The GPU side of `kernelgate run` (issue: the nightly regression suite): one session measures
// every workload of a run, building each set-up once -- the decode engine on the whole GPU, the
// green partition with its tenant (idle, a bandwidth hog, 1/4/16 LoRA training jobs) and the
// engine beside it -- and keeping it while consecutive workloads share it (order_for_run groups
// them), so a suite pays each set-up once.
#pragma once

#include <map>
#include <memory>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "suite/role_override.h"
#include "suite/suite_runner.h"
#include "workloads/step_cost_model.h"

namespace kg {

// The prompt tokens a step of the engine.* set-ups' serving engine prefills at most (its prefill
// buffers' rows); a serving workload's prefill_chunk_tokens must fit.
constexpr int suite_max_prefill_tokens = 2048;

struct suite_gpu_settings {
  int repeats = 1;                      // multiplies every workload's sample count
  std::ostream* log = nullptr;          // set-up progress lines, when set
  std::vector<role_override> overrides; // checked (check_overrides) before the first workload
  // Serving warm-up models by workload id, replayed instead of calibrated (run --warm-from): two
  // runs then start each trace's window from the same simulated state.
  std::map<std::string, step_cost_model> warm_models;
};

class suite_gpu_session {
public:
  explicit suite_gpu_session(const suite_gpu_settings& s);
  ~suite_gpu_session();
  suite_gpu_session(const suite_gpu_session&) = delete;
  suite_gpu_session& operator=(const suite_gpu_session&) = delete;

  // Runs every override against its role's fp64 oracle; throws override_error at the first that
  // fails (nothing measured yet). Returns the checks made.
  nlohmann::json check_overrides();
  // Measures one workload, entering its set-up group first (tearing the previous one down).
  // Throws std::invalid_argument for a kind or parameters the session cannot serve.
  measured_workload run(const suite_workload& w);
  // Each role's implementation and the SHA-256 of its code (the sources compiled in).
  nlohmann::json roles(const suite_workload& w) const;
  // The set-ups built so far and their wall seconds (the run's result keeps them).
  nlohmann::json setups() const;

  struct impl;

private:
  std::unique_ptr<impl> p_;
};

} // namespace kg
