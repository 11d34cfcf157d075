#include "workloads/witness_plan.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <stdexcept>

namespace kg {

namespace {

bool has_role(const task_def& t, const char* role) {
  return std::any_of(t.inputs.begin(), t.inputs.end(),
                     [&](const task_tensor& x) { return x.role == role; });
}

// The row dimension's symbol: the last dimension of the first activation input, when it is a
// symbol (an integer dimension cannot be varied).
std::string row_symbol(const task_def& t) {
  for (const auto& x : t.inputs)
    if (x.role == "activation" && !x.shape.empty()) {
      const auto& d = x.shape.back();
      const bool integer = !d.empty() && std::all_of(d.begin(), d.end(),
                                                     [](char c) { return c >= '0' && c <= '9'; });
      return integer ? "" : d;
    }
  return "";
}

input_config make(const std::string& shape, const std::map<std::string, std::int64_t>& dims,
                  int regime, const std::string& regime_name, const std::string& params,
                  std::uint64_t seed) {
  input_config c;
  c.shape = shape;
  c.dims = dims;
  c.regime = regime;
  c.regime_name = regime_name;
  c.params = params;
  c.seed = seed;
  c.name = shape + "/" + regime_name + "/" + params + "/s" + std::to_string(seed);
  return c;
}

// Long reductions: the shape with the longest row, its row 16x longer and its first other
// dimension 16x shorter (about as many elements), in the first regime. A reduction that drops a
// step, or accumulates in a narrow type, errs more the longer the row. Only where the first
// activation has a row and another symbolic dimension to trade against.
void add_long_rows(const task_def& t, const std::string& row, const std::string& first_regime,
                   std::uint64_t seed, std::vector<input_config>& plan) {
  constexpr std::int64_t factor = 16;
  const task_tensor* act = nullptr;
  for (const auto& x : t.inputs)
    if (x.role == "activation") {
      act = &x;
      break;
    }
  if (!act || act->shape.size() < 2) return;
  std::string other;
  for (const auto& d : act->shape)
    if (d != row && !d.empty() && !std::isdigit(static_cast<unsigned char>(d[0]))) {
      other = d;
      break;
    }
  if (other.empty()) return;
  const task_shape* longest = nullptr;
  for (const auto& s : t.shapes)
    if (s.dims.count(row) && s.dims.count(other) &&
        (!longest || s.dims.at(row) > longest->dims.at(row)))
      longest = &s;
  if (!longest) return;
  auto dims = longest->dims;
  dims[row] *= factor;
  dims[other] = std::max<std::int64_t>(1, dims[other] / factor);
  plan.push_back(make(longest->name + "~long" + std::to_string(dims[row]), dims, 0, first_regime,
                      "task", seed));
}

} // namespace

std::vector<input_config> witness_plan(const task_def& t, const witness_plan_options& opt) {
  if (t.regimes.empty()) throw std::invalid_argument("witness_plan: " + t.id + " has no regimes");
  if (opt.seeds < 1) throw std::invalid_argument("witness_plan: seeds must be >= 1");
  std::vector<input_config> plan;
  const auto& first = t.regimes.front().name();
  for (const auto& s : t.shapes)
    for (int r = 0; r < static_cast<int>(t.regimes.size()); ++r)
      for (int k = 0; k < opt.seeds; ++k)
        plan.push_back(make(s.name, s.dims, r, t.regimes[static_cast<std::size_t>(r)].name(),
                            "task", opt.first_seed + static_cast<std::uint64_t>(k)));
  // Parameters together (identity, N(0,1)), then one role at a time where there are two.
  std::vector<const char*> params;
  if (has_role(t, "weight") || has_role(t, "bias")) params = {"identity", "normal"};
  if (has_role(t, "weight") && has_role(t, "bias"))
    params.insert(params.end(), {"weight_normal", "bias_normal"});
  for (const auto& s : t.shapes)
    for (const char* p : params)
      plan.push_back(make(s.name, s.dims, 0, first, p, opt.first_seed));
  const auto row = row_symbol(t);
  if (row.empty()) return plan;
  int tail_extreme = -1;
  for (int r = 0; r < static_cast<int>(t.regimes.size()); ++r)
    if (t.regimes[static_cast<std::size_t>(r)].kind == regime_kind::tail_extreme) tail_extreme = r;
  std::set<std::pair<std::string, std::int64_t>> seen; // (shape, row value) already planned
  for (const auto& s : t.shapes) {
    const auto it = s.dims.find(row);
    if (it == s.dims.end()) continue;
    for (const std::int64_t v : {it->second - 1, it->second - 31}) {
      if (v < 1 || v % 32 == 0 || !seen.insert({s.name, v}).second) continue;
      auto dims = s.dims;
      dims[row] = v;
      const auto name = s.name + "~tail" + std::to_string(v);
      plan.push_back(make(name, dims, 0, first, "task", opt.first_seed));
      if (tail_extreme > 0)
        plan.push_back(make(name, dims, tail_extreme,
                            t.regimes[static_cast<std::size_t>(tail_extreme)].name(), "task",
                            opt.first_seed));
    }
  }
  add_long_rows(t, row, first, opt.first_seed, plan);
  return plan;
}

} // namespace kg
