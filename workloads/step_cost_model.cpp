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

step_cost_model step_cost_model::quantized() const {
  const auto q = [](double x) {
    return x > 0 ? std::exp2(std::round(16.0 * std::log2(x)) / 16.0) : x;
  };
  step_cost_model m = *this;
  for (auto& [b, t] : m.decode_seconds)
    t = q(t);
  m.prefill_seconds_per_token = q(prefill_seconds_per_token);
  return m;
}

double warm_up_seconds(const step_cost_model& m, int max_batch, std::int64_t chunk_tokens,
                       std::int64_t output_tokens) {
  return static_cast<double>(output_tokens) * m.longest_step(max_batch, chunk_tokens);
}

} // namespace kg
