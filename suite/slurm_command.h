// `kernelgate slurm submit --shards N [...] -- COMMAND...` and `kernelgate slurm status JOBID`:
// a sharded command (suite/shard_plan.h) as a Slurm array job with one GPU per task through GRES,
// the shard index from SLURM_ARRAY_TASK_ID, --requeue so a preempted task starts again and
// resumes its folder (--resume), and a merge job that runs after the array whatever its outcome
// (afterany), so the merged result names what failed.
//
// Layout under the command's --out OUT: OUT/slurm/{shards,merge}.sbatch, the logs
// OUT/slurm/shard-I.log and merge.log, OUT/slurm/jobs.json, the shards' folders OUT/shards/I,
// and the merged result in OUT itself.
#pragma once

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

namespace kg {

struct slurm_options {
  std::vector<std::string> command; // the kernelgate command line, without "kernelgate"
  int shards = 0;
  int gpus_per_shard = 1; // 0: no GRES request (a CPU-only command)
  std::string partition, time, account;
  bool dry_run = false;
  std::string job; // status: the job id
};

struct slurm_scripts {
  std::filesystem::path out; // the merged result's folder (absolute)
  std::string shards, merge; // the two batch scripts
};

// The scripts for o.command; throws std::invalid_argument naming what is wrong (a command that
// does not shard, no --out, --shard, --gpus or --resume given, a bad shard count).
slurm_scripts make_slurm_scripts(const slurm_options& o, const std::string& kernelgate);

// One array task (or a range of pending ones) as `scontrol -o show job` reports it.
struct slurm_task {
  std::string job_id, array_task; // "3", or "4-7" for pending tasks not yet split
  int count = 1;                  // how many tasks the line stands for
  std::string state, reason, exit_code, std_out;
};
std::vector<slurm_task> parse_scontrol_jobs(const std::string& text);
// "done", "running", "pending" or "failed" (FAILED, TIMEOUT, CANCELLED, NODE_FAIL, ...).
std::string slurm_state_class(const std::string& state);

// Exit 0 submitted (or printed); 2 bad input; 3 Slurm cannot be reached (sbatch missing or
// failing: its message).
int run_slurm_submit(const slurm_options& o, std::ostream& out, std::ostream& err);
// Exit 0 when no task failed, 1 when one did (each with its log's tail), 2 for a job Slurm does
// not know, 3 when scontrol cannot be run.
int run_slurm_status(const slurm_options& o, std::ostream& out, std::ostream& err);

} // namespace kg
