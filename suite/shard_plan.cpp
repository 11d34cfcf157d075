#include "suite/shard_plan.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <set>
#include <stdexcept>

#include "reports/environment.h"
#include "reports/result_writer.h"

namespace kg {

namespace {

bool whole_number(std::string_view s, int& v) {
  if (s.empty() || s.size() > 6) return false;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}

} // namespace

std::optional<shard_spec> parse_shard_spec(std::string_view text, std::string& why) {
  const auto slash = text.find('/');
  shard_spec s;
  if (slash == std::string_view::npos || !whole_number(text.substr(0, slash), s.index) ||
      !whole_number(text.substr(slash + 1), s.count)) {
    why = "'" + std::string(text) + "' is not I/N (two whole numbers, e.g. 0/4)";
    return std::nullopt;
  }
  if (s.count < 1 || s.count > 4096) {
    why = "N must be 1..4096 (got " + std::to_string(s.count) + ")";
    return std::nullopt;
  }
  if (s.index < 0 || s.index >= s.count) {
    why = "I must be 0.." + std::to_string(s.count - 1) + " (shards count from 0; got " +
          std::to_string(s.index) + ")";
    return std::nullopt;
  }
  return s;
}

std::vector<int> assign_shards(const std::vector<shard_item>& items, int n) {
  if (n < 1) throw std::invalid_argument("assign_shards: n must be >= 1");
  std::vector<std::size_t> order(items.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return items[a].cost > items[b].cost; });
  std::vector<double> load(static_cast<std::size_t>(n), 0);
  std::vector<std::set<std::string>> groups(static_cast<std::size_t>(n));
  std::vector<int> shard(items.size(), 0);
  for (const auto i : order) {
    const auto& it = items[i];
    int best = 0;
    double best_end = 0;
    for (int k = 0; k < n; ++k) {
      const auto K = static_cast<std::size_t>(k);
      const bool setup = !it.group.empty() && !groups[K].count(it.group);
      const double end = load[K] + it.cost + (setup ? it.group_cost : 0);
      if (k == 0 || end < best_end) best = k, best_end = end;
    }
    const auto B = static_cast<std::size_t>(best);
    load[B] = best_end;
    if (!it.group.empty()) groups[B].insert(it.group);
    shard[i] = best;
  }
  return shard;
}

std::vector<std::size_t> items_of_shard(const std::vector<shard_item>& items, shard_spec spec) {
  const auto shard = assign_shards(items, spec.count);
  std::vector<std::size_t> mine;
  for (std::size_t i = 0; i < items.size(); ++i)
    if (shard[i] == spec.index) mine.push_back(i);
  return mine;
}

nlohmann::json shard_manifest::to_json() const {
  return {{"schema", "kernelgate.shard/1"},
          {"command", command},
          {"index", spec.index},
          {"count", spec.count},
          {"items", items},
          {"assigned", assigned},
          {"identity", identity},
          {"environment", environment},
          {"slurm", slurm}};
}

shard_manifest shard_manifest::from_json(const nlohmann::json& j) {
  if (!j.is_object() || j.value("schema", "") != "kernelgate.shard/1")
    throw std::invalid_argument("not a kernelgate.shard/1 object");
  shard_manifest m;
  try {
    m.command = j.at("command").get<std::string>();
    m.spec = {j.at("index").get<int>(), j.at("count").get<int>()};
    m.items = j.at("items").get<std::vector<std::string>>();
    m.assigned = j.at("assigned").get<std::vector<std::string>>();
    m.identity = j.at("identity");
    m.environment = j.at("environment");
    m.slurm = j.value("slurm", nlohmann::json());
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("malformed: ") + e.what());
  }
  if (m.spec.count < 1 || m.spec.index < 0 || m.spec.index >= m.spec.count)
    throw std::invalid_argument("index " + std::to_string(m.spec.index) + " of " +
                                std::to_string(m.spec.count) + " shards");
  return m;
}

nlohmann::json slurm_context() {
  const char* job = std::getenv("SLURM_JOB_ID");
  if (!job) return nullptr;
  nlohmann::json s = nlohmann::json::object();
  for (const char* k :
       {"SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_RESTART_COUNT",
        "SLURMD_NODENAME", "SLURM_JOB_PARTITION", "CUDA_VISIBLE_DEVICES"})
    if (const char* v = std::getenv(k)) s[k] = v;
  return s;
}

shard_manifest make_shard_manifest(std::string command, shard_spec spec,
                                   std::vector<std::string> items,
                                   std::vector<std::string> assigned, nlohmann::json identity) {
  shard_manifest m;
  m.command = std::move(command);
  m.spec = spec;
  m.items = std::move(items);
  m.assigned = std::move(assigned);
  m.identity = std::move(identity);
  m.environment = collect_environment();
  m.slurm = slurm_context();
  return m;
}

void write_shard_manifest(const std::filesystem::path& dir, const shard_manifest& m) {
  try {
    write_file_atomically(dir / shard_manifest_file, m.to_json().dump(1) + "\n");
  } catch (const std::exception& e) {
    throw output_error(std::string("cannot write ") + (dir / shard_manifest_file).string() + ": " +
                       e.what());
  }
}

shard_manifest read_shard_manifest(const std::filesystem::path& dir) {
  const auto file = dir / shard_manifest_file;
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw std::runtime_error(dir.string() + ": not a shard folder (no readable " +
                             shard_manifest_file + ")");
  try {
    return shard_manifest::from_json(nlohmann::json::parse(in));
  } catch (const std::exception& e) {
    throw std::runtime_error(file.string() + ": " + e.what());
  }
}

} // namespace kg
