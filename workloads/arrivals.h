// The decode engine's offered load (docs/architecture.md, The Qwen3-4B stack): Poisson arrivals
// of requests of 1, 2, 4 or 8 sequences (40/30/20/10%: the production mix; the suites also offer
// all-1 and all-8 mixes), each sequence with a context drawn log-uniformly from min..max_context
// tokens and 256 output tokens. Seeded: the same seed and rate give the same trace anywhere.
#pragma once

#include <cstdint>
#include <vector>

namespace kg {

struct arrival_options {
  double requests_per_second = 1.0;
  double duration_seconds = 60.0;
  std::int64_t min_context = 512, max_context = 8192;
  std::int64_t output_tokens = 256;
  std::uint64_t seed = 1;
  // Sequences per request and their weights (integers: request size k drawn with probability
  // weight_k / sum). The default is the production mix; its draws are those of every earlier
  // trace, so a seed still gives the trace it gave.
  std::vector<int> request_sizes = {1, 2, 4, 8};
  std::vector<int> size_weights = {4, 3, 2, 1};
};

// The mean sequences per request of a mix (for converting sequences/s to requests/s).
double mean_request_size(const arrival_options& opt);

struct request {
  double arrival_seconds = 0;
  std::vector<std::int64_t> contexts; // one per sequence (1, 2, 4 or 8 of them)
  std::int64_t output_tokens = 256;
};

std::vector<request> generate_arrivals(const arrival_options& opt);

// The mean of the context draw: (max - min) / ln(max / min) for the log-uniform band, min when
// the band is one value.
double mean_context(const arrival_options& opt);

// A trace with a warm-up before it (batching_options::measure_from_seconds = warm_up_seconds):
// the window's arrivals are generate_arrivals(opt)'s, moved later by warm_up_seconds, so a seed
// gives the same window whatever the warm-up; the warm-up's come from their own seed, counted
// back from the window's start, so the arrivals nearest the window stay the same when the
// warm-up grows. In arrival order.
std::vector<request> generate_warm_arrivals(const arrival_options& opt, double warm_up_seconds);

} // namespace kg
