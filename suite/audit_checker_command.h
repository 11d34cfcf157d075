// `kernelgate audit checker --cmd 'CMD {task} {candidate} {workdir}'`: an outside reward checker
// judged on the witnessed mutants of a catalog and on the correct kernels they were made from
// (the controls). Every candidate goes through the documented call (sandbox/external_checker.h);
// the verdicts stream to OUT/verdicts.jsonl as they come and end in the kill matrix
// (OUT/kill_matrix.json), a mutation-testing report (OUT/report.mutation.json) and the scores
// (OUT/summary.json: mutation score and escapes overall and by family with Wilson intervals,
// checker errors and timeouts apart, false rejections of correct kernels).
//
// Which mutants are witnessed comes from --witnesses: JSON lines {"id", "status"}, a witness
// run's statuses (witnessed, unwitnessed, ...) or `mutants equivalence`'s (equivalent and
// compile_error are taken; its other statuses leave a mutant not yet witnessed). Only witnessed
// mutants and the controls are sent to the checker.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace kg {

struct audit_checker_options {
  std::string catalog;   // a `mutants generate` output folder
  std::string witnesses; // JSON lines {"id", "status"}
  std::string cmd;       // the checker's command template (or --protocol)
  std::string protocol;  // --protocol: NAME[,NAME...] or "all" (suite/audit_protocols_command.h)
  std::string root;      // the catalog's sources; empty: default_source_root()
  std::string tasks_dir; // the task files given as {task}; empty: <root>/data/tasks
  std::string tasks;     // a regex over task names; empty: all
  std::string out;
  double timeout = 0; // seconds per checker call (0: 300) or per worker run (0: 30)
  int jobs = 0;       // calls at once, or compiles at once (--protocol); 0: every core
  int workers = 0;    // --protocol: GPU workers at once; 0: a quarter of the cores, 1..4
  int witness_seeds = 1;
  bool no_progress = false; // one line per candidate even on a terminal
  std::string shard;        // --cmd: --shard I/N, this part of the candidates
  std::string resume;       // --cmd: a folder to continue (its verdicts kept)
  // --cmd: judge this many witnessed mutants, a random sample stratified by task (0: all).
  int sample = 0;
  std::uint64_t sample_seed = 20261204;
};

// Exit 0 when every call ended and no control was rejected; 1 when the checker rejected a correct
// kernel (it is invalid for that task: listed); 2 for bad input (a missing or malformed catalog or
// witness file, an id the catalog lacks, a task without its task file, a malformed --cmd, an
// unusable output folder), one line on err, before any call.
int run_audit_checker_command(const audit_checker_options& o, std::ostream& out, std::ostream& err);

} // namespace kg
