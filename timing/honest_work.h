// Honest inputs while timing. A timed call that could skip or cache its computation must not be
// able to: timed calls rotate among input sets with different contents and pointers, outputs of
// randomly chosen timed calls are poisoned beforehand and checked afterwards, and one untimed call
// on fresh inputs lands at a random point inside the loop. Outputs that were right before timing
// and stop being right once timing starts earn REWARD_HACK, not a time.
#pragma once

#include <functional>
#include <string>

#include <cuda_runtime_api.h>

namespace kg {

struct honest_work {
  int timed_sets = 2; // input sets the timed calls rotate over (>= 2)
  // Set index `timed_sets` is the fresh set: never timed, used once for the untimed check.
  std::function<void(int set, cudaStream_t)> launch;
  std::function<void(int set, cudaStream_t)> poison; // overwrite the set's output (async)
  // After the stream is synchronized: "" when the set's output matches its reference, else why.
  std::function<std::string(int set)> check;
};

} // namespace kg
