// A serving step's seconds from its plan, for a warm start's simulated steps
// (batching_options::measure_from_seconds): the decode of `batch` rows, piecewise linear between
// batch sizes measured on the engine (the last segment extended beyond them), plus the step's
// prompt tokens at a measured cost per token. The engine measures it (decode_driver.h,
// calibrate_step_cost) under the workload's own conditions, a co-located tenant included; the
// window's steps are then measured on the GPU as ever. It only has to bring the batch near its
// steady size, not to predict a step.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "workloads/continuous_batching.h"

namespace kg {

struct step_cost_model {
  std::vector<std::pair<int, double>> decode_seconds; // (batch, seconds), batch ascending
  double prefill_seconds_per_token = 0;

  double decode(int batch) const; // 0 for no rows
  double seconds(const step_plan& plan) const;
  // The longest step the loop can plan: max_batch rows decoding beside a full chunk of prompt.
  double longest_step(int max_batch, std::int64_t chunk_tokens) const;
};

// The model as records carry it ({"decode_seconds": [{"batch", "seconds"}],
// "prefill_seconds_per_token"}), and back: a run replays another run's warm-ups from its records
// (`kernelgate run --warm-from`). from_json throws std::invalid_argument naming what is wrong (no
// points, a batch below 1 or out of order, a time that is not a positive finite number).
nlohmann::json step_cost_model_json(const step_cost_model& m);
step_cost_model step_cost_model_from_json(const nlohmann::json& j);

// How long a warm-up brings the batch to its steady size: one sequence's life at the longest
// step (output_tokens steps), so that no sequence running at the window's start began before
// the warm-up did.
double warm_up_seconds(const step_cost_model& m, int max_batch, std::int64_t chunk_tokens,
                       std::int64_t output_tokens);

} // namespace kg
