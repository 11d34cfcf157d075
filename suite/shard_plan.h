// Splitting a long command's work over processes (`--shard I/N`, `--gpus LIST`, `kernelgate slurm
// submit`) and describing each part so `kernelgate merge` can put them back together.
//
// The split depends only on the work list (ids, expected costs, set-up groups) and N: every
// shard computes the whole plan and keeps its part, so N processes on N machines agree without
// talking. Each shard writes OUT/shard.json before any work: the command, I and N, every item of
// the whole plan in its unsharded order, the items it was given, the identity its results must
// share with the other shards', and where it ran (build, GPU model, Slurm job).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kg {

struct shard_spec {
  int index = 0; // 0-based, as Slurm's SLURM_ARRAY_TASK_ID with --array=0-(N-1)
  int count = 1;
  bool operator==(const shard_spec&) const = default;
};

// "I/N" with 0 <= I < N <= 4096; "" and the reason otherwise.
std::optional<shard_spec> parse_shard_spec(std::string_view text, std::string& why);

struct shard_item {
  std::string id;
  double cost = 1;       // expected seconds (or any unit shared by the list)
  std::string group;     // items of one group share a set-up ("" none)
  double group_cost = 0; // what that set-up costs, paid once per shard that has the group
};

// The shard of each item, in input order. Longest expected cost first (ties: input order), each
// to the shard whose load would end lowest, a set-up it lacks counted in (ties: lowest index).
// Throws std::invalid_argument for n < 1.
std::vector<int> assign_shards(const std::vector<shard_item>& items, int n);

// The items of `spec`'s shard, in input order.
std::vector<std::size_t> items_of_shard(const std::vector<shard_item>& items, shard_spec spec);

struct shard_manifest {
  std::string command; // "run", "eval", "audit checker"
  shard_spec spec;
  std::vector<std::string> items;    // the whole plan, unsharded order
  std::vector<std::string> assigned; // this shard's, in the order it runs them
  nlohmann::json identity;           // must be equal across the shards of one run
  nlohmann::json environment;        // collect_environment() of the shard's process
  nlohmann::json slurm;              // SLURM_JOB_ID etc. when run by Slurm, else null
  nlohmann::json to_json() const;
  static shard_manifest from_json(const nlohmann::json& j); // throws std::invalid_argument
};

inline constexpr const char* shard_manifest_file = "shard.json";

// The Slurm variables of this process (job, array job and task, node, CUDA_VISIBLE_DEVICES), or
// null outside Slurm.
nlohmann::json slurm_context();

// A manifest of this process: environment and Slurm context filled in.
shard_manifest make_shard_manifest(std::string command, shard_spec spec,
                                   std::vector<std::string> items,
                                   std::vector<std::string> assigned, nlohmann::json identity);

// Writes DIR/shard.json atomically (throws output_error); reads it (throws std::runtime_error
// naming the file and what is wrong).
void write_shard_manifest(const std::filesystem::path& dir, const shard_manifest& m);
shard_manifest read_shard_manifest(const std::filesystem::path& dir);

} // namespace kg
