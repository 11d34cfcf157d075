// `--gpus LIST` of `run` and `audit checker --cmd`: the Slurm array's split on one machine. One
// child process per listed GPU (CUDA_VISIBLE_DEVICES set to it), each `kernelgate ARGS --shard
// I/N --out OUT/shards/I` with its output in OUT/shards/shard-I.log, all at once; then `merge` of
// the shards into OUT, as `kernelgate merge` does.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace kg {

// "0,1,2,3" -> {"0","1","2","3"}: device ordinals or UUIDs, none repeated; throws
// std::invalid_argument naming the problem.
std::vector<std::string> parse_gpu_list(const std::string& text);

// args: the whole command line (args[0] the program, --gpus and --out among them). Returns the
// merge's exit code, or 2 for a bad --gpus/--out, 4 when a child cannot be started.
int run_local_shards(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

} // namespace kg
