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

#include "workloads/continuous_batching.h"

namespace kg {

struct step_cost_model {
  std::vector<std::pair<int, double>> decode_seconds; // (batch, seconds), batch ascending
  double prefill_seconds_per_token = 0;

  double decode(int batch) const; // 0 for no rows
  double seconds(const step_plan& plan) const;
  // The longest step the loop can plan: max_batch rows decoding beside a full chunk of prompt.
  double longest_step(int max_batch, std::int64_t chunk_tokens) const;
  // Every value rounded to the nearest power of 2^(1/16) (4.4% apart). Why: two calibrations of
  // one build differ by a few percent; rounded they mostly agree, and then the warm-ups simulated
  // from them hand the window the same state, so two runs' traces stay paired.
  step_cost_model quantized() const;
};

// How long a warm-up brings the batch to its steady size: one sequence's life at the longest
// step (output_tokens steps), so that no sequence running at the window's start began before
// the warm-up did.
double warm_up_seconds(const step_cost_model& m, int max_batch, std::int64_t chunk_tokens,
                       std::int64_t output_tokens);

} // namespace kg
