// `kernelgate eval`: every (task, candidate) pair -- compile (parallel, cached), sandboxed run,
// correctness against the fp64 oracle -- streamed as `evaluation` records.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace kg {

// The options of `kernelgate eval`, as suite/cli.cpp declares them (help texts there).
struct eval_options {
  std::string tasks, candidates;     // a glob of task files; a folder of candidates
  std::string protocol = "strict";   // strict, or a peer's checker (oracles/protocol.h)
  int trials = 3;                    // draws per shape (at least one per input regime)
  double timeout = 60;               // seconds, each worker request
  int jobs = 0;                      // compile parallelism (0: every core)
  int workers = 0;                   // worker threads (0: a quarter of the cores, 1 to 4)
  std::string cache;                 // compile cache ("" : the default)
  std::string out = "kg-out/eval";   // output folder
  std::string time = "yes";          // yes | no
  std::string baselines;             // the task kernels timed against ("": kernels/tasks)
  std::string kernelbench;           // also write KernelBench's eval_results.json here
  double time_budget = 0.05;         // seconds per timing phase
  std::string scratch;               // trial tensors ("": /dev/shm, else <out>/work)
  std::string torch_time = "cached"; // cached | fresh | no
  std::optional<std::uint64_t> seed; // none: a secret seed from the OS
  bool no_progress = false;          // one line per pair even on a terminal
  std::string shard;                 // --shard I/N: this part of the pairs (needs --seed)
  std::string resume;                // a folder to continue (needs --seed)
};

// The folder of the task kernels (eval's default --baselines).
std::string default_baselines_dir();

// `argv` is the command line, recorded in the result.
int run_eval_command(const eval_options& o, const std::vector<std::string>& argv, std::ostream& out,
                     std::ostream& err);

} // namespace kg
