#include "oracles/task_oracles.h"

#include <map>
#include <mutex>
#include <stdexcept>

namespace kg {
namespace {
std::map<std::string, task_oracle_fn, std::less<>>& raw_registry() {
  static std::map<std::string, task_oracle_fn, std::less<>> r;
  return r;
}

std::map<std::string, task_oracle_fn, std::less<>>& registry() {
  static std::once_flag once;
  std::call_once(once, [] {
    // One line per op file.
    register_elementwise_oracles();
    register_norm_oracles();
    register_single_oracles();
    register_matmul_oracles();
    register_fused_oracles();
    register_decode_oracles();
  });
  return raw_registry();
}
} // namespace

bool register_task_oracle(const std::string& op, task_oracle_fn fn) {
  raw_registry()[op] = std::move(fn);
  return true;
}

const task_oracle_fn* find_task_oracle(std::string_view op) {
  const auto it = registry().find(op);
  return it == registry().end() ? nullptr : &it->second;
}

std::vector<std::string> task_oracle_ops() {
  std::vector<std::string> out;
  for (const auto& [k, v] : registry())
    out.push_back(k);
  return out;
}

std::vector<host_tensor> run_task_oracle(const task_def& t, const task_shape& shape,
                                         const std::vector<host_tensor>& inputs) {
  const auto* fn = find_task_oracle(t.op);
  if (!fn) throw std::invalid_argument("no fp64 oracle for op '" + t.op + "'");
  return (*fn)(t, shape, inputs);
}

host_tensor oracle_output(const task_def& t, const task_shape& shape, std::size_t k) {
  return host_tensor(dtype::float64, resolve_shape(t.outputs.at(k), shape));
}

} // namespace kg
