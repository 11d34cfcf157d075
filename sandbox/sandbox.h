// Evaluates one compiled candidate on one task: imports checked, then every shape of the task on
// `trials` input draws, all run in a worker process (own CUDA context, process group, wall-clock
// timeout, resource limits; sandbox/worker_pool.h), outputs compared in this process with the fp64
// oracle, then a candidate that passed is timed in the same worker. The harness never dies of a
// candidate: a crash, a hang or a CUDA error is a status with its reason.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "oracles/protocol.h"
#include "reports/eval_status.h"
#include "sandbox/candidate_compiler.h"
#include "sandbox/trial_cache.h"
#include "sandbox/worker_pool.h"
#include "workloads/task.h"

namespace kg {

// PASSED, INCORRECT_SHAPE, INCORRECT_NUMERICAL, INCORRECT_DTYPE, RUNTIME_ERROR, COMPILE_ERROR,
// TIMEOUT, REWARD_HACK, NONDETERMINISTIC, INVALID_REFERENCE, MISSING.
struct candidate_verdict {
  std::optional<eval_status> status; // none until decided
  std::string reason;
  nlohmann::json detail = nlohmann::json::object(); // trials, comparisons, imports, worker log
  bool interrupted = false; // not evaluated: the run was stopped (SIGINT/SIGTERM) first
};

struct sandbox_options {
  std::filesystem::path self_exe; // the kernelgate binary (run as `kernelgate worker MANIFEST`)
  std::filesystem::path work_dir; // per-pair scratch files (inputs, outputs, logs)
  int trials = 3; // input draws per shape, one after another in one process (strict: at least
                  // one per input regime the task declares)
  double timeout_seconds = 60;   // per worker (all trials)
  std::uint64_t seed = 20261129; // eval passes its run's seed (secret unless --seed)
  // nullptr: kernelgate's strict rule (every element within the task's tolerance of the fp64
  // oracle, every shape, `trials` draws). Otherwise a peer's checker as oracles/protocol.h models
  // it: its input regime (activation distribution, parameter init, scales), its trial count, its
  // comparator against the task's LibTorch reference, on the task's first shape (and the second
  // where the protocol runs a tail shape).
  const protocol* peer = nullptr;
  trial_cache* cache = nullptr;     // trial data and files shared across candidates (nullptr: a
                                    // private cache under work_dir)
  worker_process* worker = nullptr; // a long-lived worker (nullptr: one for this call only)
  gpu_gate* gate = nullptr; // shared while checking, exclusive while timing (nullptr: no sharing)
  // Timing of a PASSED candidate (the same worker, the GPU held alone): honest timing on the
  // task's first shape, then ABBA pairs against the baseline kernel (the task's own kernel) when
  // one is given.
  bool time = true;
  const compile_result* baseline = nullptr;
  // Wall-clock cap of each of the two measurements (the candidate's honest run, the ABBA pairs);
  // both also stop earlier once their interval is narrow enough.
  double time_wall_seconds = 0.05;
  // Also time the task's LibTorch reference on the GPU (the same timer, the same inputs), when
  // the candidate was timed: the record's torch_us. eval asks for it once per task.
  bool time_torch_reference = false;
};

// Every trial evaluate_candidate will need the CPU side of (correctness trials, then the timing
// sets when opt.time): what a caller prefetches into opt.cache.
std::vector<trial_key> planned_trials(const task_def& task, const sandbox_options& opt);

// The serve command of a worker (`kernelgate worker --serve`) and the limits it runs under.
std::vector<std::string> worker_command(const std::filesystem::path& self_exe);
process_limits worker_limits();

candidate_verdict evaluate_candidate(const task_def& task, const compile_result& compiled,
                                     const sandbox_options& opt);

} // namespace kg
