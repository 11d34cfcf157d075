// `kernelgate run --suite nightly|smoke|FILE` (issue: the nightly regression suite): the suite's
// workloads in run order on one GPU session, records streamed to OUT/records.jsonl, result.json
// at the end; --resume DIR continues a run that was killed.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace kg {

struct run_options {
  std::string suite;
  std::string filter; // ECMAScript regex over ids (search)
  std::string out;    // default kg-out/run-<suite>
  std::string resume; // a run folder to continue
  int repeats = 1;    // multiplies every workload's samples
  std::string clocks = "observe";
  std::vector<std::string> overrides; // ROLE=FILE.cu (suite/role_override.h)
  std::string warm_from; // a finished run whose serving warm-up models this run replays
  bool no_progress = false;
  bool list_only = false; // --dry-run: print the run order and the expected time, run nothing
  std::optional<std::string> history; // --history: the database the finished run is appended to
  std::string shard;      // --shard I/N: run only this part of the suite (suite/shard_plan.h)
  std::string costs_from; // a finished run whose measured times split the shards
};

int run_suite_command(const run_options& o, const std::vector<std::string>& args, std::ostream& out,
                      std::ostream& err);

} // namespace kg
