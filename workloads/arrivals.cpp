#include "workloads/arrivals.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "base/rng.h"

namespace kg {

namespace {

// The request size of a draw u in [0, sum of weights): the first size whose cumulative weight
// exceeds u (for the production mix: 0-3 -> 1, 4-6 -> 2, 7-8 -> 4, 9 -> 8).
int size_of_draw(const arrival_options& opt, std::uint64_t u) {
  std::uint64_t cumulative = 0;
  for (std::size_t k = 0; k < opt.request_sizes.size(); ++k) {
    cumulative += static_cast<std::uint64_t>(opt.size_weights[k]);
    if (u < cumulative) return opt.request_sizes[k];
  }
  return opt.request_sizes.back();
}

std::uint64_t total_weight(const arrival_options& opt) {
  if (opt.request_sizes.empty() || opt.request_sizes.size() != opt.size_weights.size())
    throw std::invalid_argument("arrivals: request_sizes and size_weights must pair up");
  std::uint64_t sum = 0;
  for (std::size_t k = 0; k < opt.size_weights.size(); ++k) {
    if (opt.size_weights[k] < 0 || opt.request_sizes[k] < 1)
      throw std::invalid_argument("arrivals: sizes >= 1 and weights >= 0");
    sum += static_cast<std::uint64_t>(opt.size_weights[k]);
  }
  if (sum == 0) throw std::invalid_argument("arrivals: the size weights sum to 0");
  return sum;
}

} // namespace

double mean_request_size(const arrival_options& opt) {
  const double sum = static_cast<double>(total_weight(opt));
  double mean = 0;
  for (std::size_t k = 0; k < opt.request_sizes.size(); ++k)
    mean += opt.request_sizes[k] * (opt.size_weights[k] / sum);
  return mean;
}

std::vector<request> generate_arrivals(const arrival_options& opt) {
  const std::uint64_t weights = total_weight(opt);
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
    const int n = size_of_draw(opt, sizes.below(weights));
    for (int k = 0; k < n; ++k) {
      const double c = std::exp(lo + (hi - lo) * contexts.uniform01());
      r.contexts.push_back(std::min<std::int64_t>(opt.max_context, std::llround(c)));
    }
    out.push_back(std::move(r));
  }
  return out;
}

double mean_context(const arrival_options& opt) {
  const double lo = static_cast<double>(opt.min_context), hi = static_cast<double>(opt.max_context);
  return hi > lo ? (hi - lo) / std::log(hi / lo) : lo;
}

std::vector<request> generate_warm_arrivals(const arrival_options& opt, double warm_up_seconds) {
  auto before = opt;
  before.duration_seconds = warm_up_seconds;
  before.seed = opt.seed ^ 0x9e3779b97f4a7c15ull; // the warm-up's own draws
  std::vector<request> out;
  if (warm_up_seconds > 0) out = generate_arrivals(before);
  for (auto& r : out)
    r.arrival_seconds = warm_up_seconds - r.arrival_seconds; // counted back from the window
  std::reverse(out.begin(), out.end());
  for (auto r : generate_arrivals(opt)) {
    r.arrival_seconds += warm_up_seconds;
    out.push_back(std::move(r));
  }
  return out;
}

} // namespace kg
