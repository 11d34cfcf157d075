// `kernelgate merge DIR... --out DIR`: the shards of one `run`, or `audit checker --cmd`, put
// back together as if one process had run everything (suite/shard_plan.h). Every folder's
// shard.json must name the same command, the same plan of items, the same identity (suite and
// options, or catalog and checker), the same build and the same GPU model; a folder without one
// is reported and left out. Every item of the plan no shard recorded is listed as missing, with
// its shard, why, and the tail of the shard's log (--logs DIR: DIR/shard-I.log). The output is
// the command's own (result.json and records.jsonl for a run; verdicts.jsonl, kill_matrix.json,
// report.mutation.json and summary.json for an audit) and depends only on the shards: merging
// again gives the same bytes.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace kg {

struct merge_options {
  std::vector<std::string> dirs; // shard folders
  std::string out;
  std::string logs; // where shard-I.log files are (Slurm's, or --gpus's); "" none
};

// Exit 0 when every item is present (and, for a run, every gate passed; for an audit, every
// control accepted); 1 when items are missing (the merged result says which) or gates failed;
// 2 for bad input: no folder, shards of different commands, plans, suites, options, builds or
// GPU models (named), a workload recorded by two shards, an unwritable --out.
int run_merge_command(const merge_options& o, const std::vector<std::string>& args,
                      std::ostream& out, std::ostream& err);

} // namespace kg
