#include "workloads/arrivals.h"

#include <cmath>

#include "base/rng.h"

namespace kg {

std::vector<request> generate_arrivals(const arrival_options& opt) {
  // Separate streams for gaps, sizes and contexts: changing the size mix never moves arrivals.
  rng gaps(opt.seed, stream_id("arrival_gaps")), sizes(opt.seed, stream_id("request_sizes")),
      contexts(opt.seed, stream_id("contexts"));
  const double lo = std::log(static_cast<double>(opt.min_context)),
               hi = std::log(static_cast<double>(opt.max_context));
  std::vector<request> out;
  for (double t = 0;;) {
    // Exponential gaps; 1 - u lies in (0, 1], so the log is finite.
    t += -std::log(1.0 - gaps.uniform01()) / opt.requests_per_second;
    if (t >= opt.duration_seconds) break;
    request r;
    r.arrival_seconds = t;
    r.output_tokens = opt.output_tokens;
    const std::uint64_t u = sizes.below(10); // 0-3: 1, 4-6: 2, 7-8: 4, 9: 8
    const int n = u < 4 ? 1 : u < 7 ? 2 : u < 9 ? 4 : 8;
    for (int k = 0; k < n; ++k) {
      const double c = std::exp(lo + (hi - lo) * contexts.uniform01());
      r.contexts.push_back(std::min<std::int64_t>(opt.max_context, std::llround(c)));
    }
    out.push_back(std::move(r));
  }
  return out;
}

} // namespace kg
