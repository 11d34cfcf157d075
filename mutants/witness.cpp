#include "mutants/witness.h"

namespace kg {

nlohmann::json input_config::to_json() const {
  return {{"name", name},          {"shape", shape},   {"dims", dims},
          {"regime", regime_name}, {"params", params}, {"seed", seed}};
}

nlohmann::json disagreement::to_json() const {
  if (!crash.empty()) return {{"crash", crash}};
  return {
      {"output", output}, {"index", index}, {"got", got}, {"want", want}, {"abs_error", abs_error}};
}

witness_record witness_mutant(const std::vector<input_config>& plan, const config_check& check) {
  witness_record r;
  r.kills.assign(plan.size(), false);
  for (std::size_t c = 0; c < plan.size(); ++c) {
    auto d = check(plan[c]);
    if (!d) continue;
    r.kills[c] = true;
    if (!r.first) {
      r.first = c;
      r.evidence = std::move(d);
    }
  }
  r.status = r.first ? witness_status::witnessed : witness_status::unwitnessed;
  return r;
}

nlohmann::json witness_record::to_json(const std::vector<input_config>& plan) const {
  nlohmann::json j = {{"status", witness_status_name(status)}};
  std::string bits;
  for (const bool k : kills)
    bits += k ? '1' : '0';
  j["kills"] = bits; // per plan configuration, in plan order
  if (first) {
    j["witness"] = plan.at(*first).to_json();
    j["evidence"] = evidence->to_json();
  }
  return j;
}

} // namespace kg
