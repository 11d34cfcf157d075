// Auditing one candidate of a checker audit on the GPU -- a mutant, or a correct kernel (a
// control) -- in as few worker runs as it allows: one manifest carries the task's witness plan
// (mutants/witness.h: every configuration against the fp64 oracle) and every audited protocol's
// own trials (oracles/protocol.h: its inputs, its trial count), each then judged by its own rule
// (the protocols first: see audit_candidate). It goes in two stages: each protocol's first trial
// with the whole witness plan, then the other trials of the protocols not yet decided -- a mutant
// wrong everywhere is rejected by every protocol at its first trial and costs about half the
// trials.
// A worker run costs a process, a CUDA context and the candidate's load; most candidates of a
// task are small, so one run for seven judgements is what makes thousands of mutants fit in
// minutes.
//
// A candidate that crashes or hangs ends a run early: the trial it was on counts against its
// group (a disagreement for the witness plan, a rejection for a protocol: a checker that runs a
// crashing kernel rejects it), and the next run resumes after it, skipping the protocols already
// decided; after a crash in the witness plan its other configurations are not run (each crash
// costs a worker and a CUDA context, the audit's largest cost). Protocols whose trials draw the
// same inputs share one call and its outputs, each judging them by its own rule. A hang is cut short by the worker's per-trial limit (trial_limit_seconds, set from the
// task's controls: see the audit command) rather than by the whole run's timeout. Runs are bounded
// (max_runs, max_timeouts); what was never run stays unknown (a missing verdict), never a kill.
#pragma once

#include <cstdint>
#include <deque>
#include <filesystem>
#include <string>
#include <vector>

#include "mutants/kill_matrix.h"
#include "mutants/witness.h"
#include "oracles/protocol.h"
#include "sandbox/candidate_compiler.h"
#include "sandbox/trial_cache.h"
#include "sandbox/worker_pool.h"
#include "sandbox/worker_set.h"
#include "workloads/task.h"

namespace kg {

// One column of the audit: a protocol `kernelgate protocols` lists. peer nullptr: kernelgate's
// strict rule (every shape, one draw per input regime at least, the fp64 oracle).
struct audit_check {
  std::string name;
  const protocol* peer = nullptr;
};

// A task's witness plan as trials. The extra tail shapes are not the task's, so the shapes live
// here (stable addresses: the trial keys point at them).
class witness_trials {
public:
  witness_trials(const task_def& t, std::vector<input_config> plan);
  const std::vector<input_config>& plan() const { return plan_; }
  const std::vector<trial_key>& keys() const { return keys_; }

private:
  std::vector<input_config> plan_;
  std::deque<task_shape> shapes_;
  std::vector<trial_key> keys_;
};

struct check_verdict {
  kill_verdict verdict = kill_verdict::missing; // killed (rejected), survived (accepted), missing
  std::string reason; // the first failing trial, "N trials accepted", or why it was not run
};

// A witness configuration whose shape the planner added (an extra tail or long-row shape) and
// whose trial the task refuses to compute (its oracle or input generator throws: rope's D must be
// even, say): not an input of the task, so never run, and it disagrees with no candidate.
struct refused_config {
  std::size_t config = 0; // index in the witness plan
  std::string reason;
};

struct candidate_audit {
  witness_record witness;            // not_run when no plan was given
  std::vector<refused_config> refused; // the same for every candidate of a task
  std::vector<check_verdict> checks; // one per audit_check, in order
  int worker_runs = 0, crashes = 0, timeouts = 0;
  int hangs = 0;                    // runs ended by the per-trial limit
  double slowest_trial_seconds = 0; // the slowest call that finished
  double median_trial_seconds = 0;  // the median of the calls that finished (what a control sets)
  double seconds = 0;
  // Where the seconds went: trials sent to workers, the runs themselves (waiting for a worker
  // included), this process's reading and judging of their outputs.
  int trials_sent = 0;
  double run_seconds = 0, judge_seconds = 0;
};

struct mutant_audit_options {
  std::filesystem::path self_exe; // the kernelgate binary (its worker)
  std::filesystem::path work_dir; // this candidate's scratch (outputs, manifests); emptied first
  std::uint64_t seed = 20261129;
  int strict_trials = 3;          // strict draws per shape (at least one per regime)
  double timeout_seconds = 30; // per worker run, plus half a second and the per-call limit a trial
  double trial_limit_seconds = 0; // per call in the worker (0: none); a call past it is a hang
  int max_runs = 8;               // worker runs per candidate (each crash costs one)
  int max_timeouts = 2; // runs that may end in a (whole-run) timeout before the rest is unknown
  trial_cache* cache = nullptr;     // required: the task's trials, shared by its candidates
  worker_process* worker = nullptr; // a long-lived worker (this, or `workers`, is required)
  // Instead of `worker`: each run takes a worker from the set and gives it back before its
  // outputs are read and judged, so a set shared by more threads than workers keeps them busy.
  worker_set* workers = nullptr;
  // Where set: a run reserves the bytes of the outputs it will write until they are judged and
  // removed (memory-backed scratch, shared by every thread).
  byte_budget* output_bytes = nullptr;
  gpu_gate* gate = nullptr;         // shared while checking (nullptr: nothing else on the GPU)
  // > 0: the worker keeps the task's inputs on the device across candidates and reuses its
  // buffers, within this many bytes (the manifest's "resident_bytes"); 0: every trial allocates.
  std::size_t resident_bytes = 0;
  // > 0 (without resident_bytes): every buffer has a 0xff guard of at least this many bytes on
  // each side (the manifest's "guard_bytes", sandbox/worker_session.h); a write into one is a
  // fault like a modified input.
  std::size_t guard_bytes = 0;
  // > 0 (without resident_bytes): the worker takes every trial's buffers (guards as above) from a
  // pool, keeping at most this many idle bytes (the manifest's "pool_bytes",
  // sandbox/resident_inputs.h); 0: every trial allocates and frees.
  std::size_t pool_bytes = 0;
  // A mutant, not a correct kernel: once its witness plan has run and shows it wrong nowhere
  // (unwitnessed), the protocols' later trials are not sent -- no score or report counts an
  // unwitnessed mutant's verdicts (mutants/kill_matrix.h), and a mutant that is correct but slow
  // would spend them at its slow pace -- and the protocols not decided by then stay missing.
  // A correct kernel's trials all run: a protocol that rejects it is invalid for its task.
  bool mutant = false;
};

// Every trial audit_candidate will take from the cache for this task (what a caller prefetches
// and forgets).
std::vector<trial_key> audit_trial_keys(const task_def& task, const witness_trials* witness,
                                        const std::vector<audit_check>& checks,
                                        const mutant_audit_options& opt);

// Throws std::invalid_argument for missing cache or worker; never for the candidate's behaviour.
candidate_audit audit_candidate(const task_def& task, const compile_result& compiled,
                                const witness_trials* witness,
                                const std::vector<audit_check>& checks,
                                const mutant_audit_options& opt);

// compute-sanitizer where this machine has one: $KERNELGATE_COMPUTE_SANITIZER, else beside the
// toolkit's nvcc, else on PATH; empty when none.
std::filesystem::path find_compute_sanitizer();

// A synchronization mutant no output check catches (unwitnessed) may still race: its smallest
// witness configuration in the first regime, run once under compute-sanitizer's racecheck and
// then synccheck (`kernelgate worker MANIFEST` under `--error-exitcode`); `found` names the tool
// that reported a hazard.
struct sanitizer_finding {
  bool ran = false, found = false;
  std::string tool;   // racecheck or synccheck, when found
  std::string detail; // the run's end, or why it did not run
  nlohmann::json to_json() const;
};
sanitizer_finding sanitize_candidate(const task_def& task, const compile_result& compiled,
                                     const witness_trials& witness, const mutant_audit_options& opt,
                                     const std::filesystem::path& sanitizer);

} // namespace kg
