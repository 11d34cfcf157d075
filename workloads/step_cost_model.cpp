#include "workloads/step_cost_model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace kg {

double step_cost_model::decode(int batch) const {
  if (batch <= 0) return 0.0;
  if (decode_seconds.empty()) throw std::logic_error("step_cost_model: no decode points");
  const auto& d = decode_seconds;
  if (d.size() == 1) return d.front().second;
  // The segment holding `batch`: the first below the lowest point, the last beyond the highest.
  std::size_t i = 1;
  while (i + 1 < d.size() && d[i].first < batch)
    ++i;
  const auto [b0, t0] = d[i - 1];
  const auto [b1, t1] = d[i];
  const double t = t0 + (t1 - t0) * (batch - b0) / static_cast<double>(b1 - b0);
  return std::max(t, 0.0);
}

double step_cost_model::seconds(const step_plan& plan) const {
  std::int64_t prompt = 0;
  for (const auto& p : plan.prefills)
    prompt += p.tokens;
  const double t = decode(static_cast<int>(plan.decode_lengths.size())) +
                   prefill_seconds_per_token * static_cast<double>(prompt);
  return std::max(t, 1e-6); // a step takes time (the loop refuses a step of none)
}

double step_cost_model::longest_step(int max_batch, std::int64_t chunk_tokens) const {
  return decode(max_batch) + prefill_seconds_per_token * static_cast<double>(chunk_tokens);
}

nlohmann::json step_cost_model_json(const step_cost_model& m) {
  nlohmann::json decode = nlohmann::json::array();
  for (const auto& [batch, seconds] : m.decode_seconds)
    decode.push_back({{"batch", batch}, {"seconds", seconds}});
  return {{"decode_seconds", decode}, {"prefill_seconds_per_token", m.prefill_seconds_per_token}};
}

step_cost_model step_cost_model_from_json(const nlohmann::json& j) {
  const auto positive = [](const nlohmann::json& v) {
    return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0;
  };
  if (!j.is_object() || !j.contains("decode_seconds") || !j["decode_seconds"].is_array() ||
      j["decode_seconds"].empty())
    throw std::invalid_argument("step cost model: no decode_seconds points");
  step_cost_model m;
  for (const auto& p : j["decode_seconds"]) {
    if (!p.is_object() || !p.contains("batch") || !p["batch"].is_number_integer() ||
        p["batch"].get<int>() < 1 || !p.contains("seconds") || !positive(p["seconds"]))
      throw std::invalid_argument("step cost model: a decode point needs a batch >= 1 and "
                                  "seconds > 0: " +
                                  p.dump());
    const int b = p["batch"].get<int>();
    if (!m.decode_seconds.empty() && b <= m.decode_seconds.back().first)
      throw std::invalid_argument("step cost model: decode batches must ascend");
    m.decode_seconds.push_back({b, p["seconds"].get<double>()});
  }
  if (!j.contains("prefill_seconds_per_token") || !positive(j["prefill_seconds_per_token"]))
    throw std::invalid_argument("step cost model: prefill_seconds_per_token must be > 0");
  m.prefill_seconds_per_token = j["prefill_seconds_per_token"].get<double>();
  return m;
}

double warm_up_seconds(const step_cost_model& m, int max_batch, std::int64_t chunk_tokens,
                       std::int64_t output_tokens) {
  return static_cast<double>(output_tokens) * m.longest_step(max_batch, chunk_tokens);
}

} // namespace kg
