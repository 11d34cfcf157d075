// Throughput at a latency limit: raise the offered load in 5% steps until the p99 inter-token
// latency (first token excluded) exceeds the limit; the answer is the last load within it.
// The measurement is a callback, so the search logic is tested without a GPU.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

namespace kg {

struct load_point {
  double offered_rps = 0;
  double p99_itl_ms = 0;
  double tokens_per_second = 0;
};

struct load_search_options {
  double start_rps = 0.5;
  double step = 0.05;     // relative: each step offers 5% more than the last
  double limit_ms = 50.0; // p99 inter-token latency limit
  int max_steps = 200;
};

struct load_search_result {
  std::vector<load_point> points;    // every load tried, in order
  bool found = false;                // some load met the limit
  load_point best;                   // the highest load that met it
  bool limit_never_exceeded = false; // max_steps reached while still within the limit
};

load_search_result search_load(const std::function<load_point(double offered_rps)>& measure,
                               const load_search_options& opt = {});

// The suites' search, in few loads: the load grows by `growth` (x2) from start_rps until p99
// exceeds the limit (the limit is then bracketed between the last load within it and the first
// beyond), then `bisections` geometric midpoints narrow the bracket; best is the highest load
// tried within the limit. At most max_steps loads; limit_never_exceeded when growth stopped at
// max_steps without crossing. A measurement whose p99 is not finite counts as beyond the limit.
// With saturation_loads > 0, growth also stops (within the limit) after that many consecutive
// loads whose tokens/s rose less than saturation_gain over the best so far: the server is
// saturated, more offered load only queues (saturated, limit_never_exceeded).
struct bracketed_search_options {
  double start_rps = 0.5;
  double growth = 2.0;
  int bisections = 3;
  double limit_ms = 50.0;
  int max_steps = 12;
  int saturation_loads = 0;
  double saturation_gain = 0.05;
};
struct bracketed_search_result : load_search_result {
  bool saturated = false;    // growth stopped at saturation (see saturation_loads)
  bool crossed = false;      // some load exceeded the limit
  double bracket_lo_rps = 0; // the highest load within the limit (best.offered_rps)
  double bracket_hi_rps = 0; // the lowest load beyond it (0: none found)
};
bracketed_search_result
search_load_bracketed(const std::function<load_point(double offered_rps)>& measure,
                      const bracketed_search_options& opt = {});

// Throughput at the limit for one arrival trace, from its traces at the bracket's two loads
// (lo within the limit, hi beyond it for the search's own trace): p99 is taken as linear between
// them and the crossing is where it reaches the limit, at fraction f = (limit - p99_lo) /
// (p99_hi - p99_lo) of the way from lo to hi (the load geometric, tokens/s linear in f). A trace
// of another seed may put both loads on one side: f is then clamped to 0 (lo already beyond) or
// 1 (hi still within); a non-finite p99 at hi also gives 0. Why: the search's loads are a grid, and
// a throughput read off the grid jumps by a grid step when one trace's p99 lands on the other side
// of the limit; the interpolated value moves with p99, so two runs of one build agree.
struct limit_crossing {
  double fraction = 0;          // 0 at lo, 1 at hi
  double offered_rps = 0;       // lo * (hi / lo)^fraction
  double tokens_per_second = 0; // tps_lo + fraction * (tps_hi - tps_lo)
  int clamped = 0; // -1: taken at lo (lo beyond, or p99_hi not finite), +1: at hi, 0: between
};
limit_crossing interpolate_limit(const load_point& lo, const load_point& hi, double limit_ms);

// p99 of inter-token intervals: per sequence, token times t0..tn give intervals t1-t0 ... (the
// first token's latency, from arrival, is not an inter-token interval and is excluded).
double p99_inter_token_ms(const std::vector<std::vector<double>>& token_times_ms);

// The distribution of those intervals (the report draws it per trace): how many, and their 50th,
// 90th and 99th percentiles by nearest rank (the smallest interval with at least that share of
// the intervals at or below it) and the largest. All 0 without an interval.
struct inter_token_summary {
  std::size_t gaps = 0;
  double p50_ms = 0, p90_ms = 0, p99_ms = 0, max_ms = 0;
};
inter_token_summary
summarize_inter_token_ms(const std::vector<std::vector<double>>& token_times_ms);

} // namespace kg
