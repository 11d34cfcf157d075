// A hand-made request for the batching loop's tests: arriving at `at` seconds, one sequence per
// context, `out` output tokens each.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "workloads/arrivals.h"

namespace kg::test {

inline request req(double at, std::vector<std::int64_t> contexts, std::int64_t out) {
  request r;
  r.arrival_seconds = at;
  r.contexts = std::move(contexts);
  r.output_tokens = out;
  return r;
}

} // namespace kg::test
