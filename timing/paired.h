// Paired comparison: baseline A and candidate B measured interleaved in randomized ABBA / BAAB
// blocks, one ratio B/A per adjacent pair, so clock and thermal drift shared by a pair cancels.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "stats/bootstrap.h"
#include "stats/decision.h"
#include "timing/gpu_timer.h"

namespace kg {

struct paired_options {
  int min_pairs = 30;
  int max_pairs = 20000;
  double target_rel_halfwidth = 0.0025; // of the 95% interval of the median pair ratio
  double max_wall_seconds = 20.0;
  double min_effect = default_min_effect;
  std::uint64_t seed = 0x61626261ull; // block order stream ("abba")
};

// Honest pairs: untimed steps around every call of either member (member 0 is A, 1 is B), as in
// honest timing (staging inputs, filling and checking outputs), and what those checks found so far
// ("" while all passed; read after each batch of pairs). A failed check ends the run.
struct paired_hooks {
  std::function<void(int member, cudaStream_t)> before, after;
  std::function<std::string()> failed;
};

struct paired_result {
  std::vector<double> a_us, b_us, ratios; // kept pairs; ratio = b / a (below 1: B is faster)
  int pairs_discarded = 0;                // a member below the clock floor
  bootstrap_interval ratio_ci{};          // median of the pair ratios, BCa 95%
  decision verdict = decision::ambiguous;
  double min_effect = default_min_effect;
  std::string stop_reason;
  std::string check_failure; // with hooks: what failed (stop_reason check_failed, no decision)
  int checked_calls = 0;
  double wall_seconds = 0;
  nlohmann::json to_json() const;
};

paired_result measure_paired(gpu_timer& timer, const work_fn& a, const work_fn& b,
                             const paired_options& opt = {}, const paired_hooks* hooks = nullptr);

} // namespace kg
