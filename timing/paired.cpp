#include "timing/paired.h"

#include <chrono>

#include "timing/interrupt.h"
#include "base/rng.h"

namespace kg {

nlohmann::json paired_result::to_json() const {
  return {{"pairs_kept", ratios.size()},
          {"pairs_discarded", pairs_discarded},
          {"ratio_definition", "candidate_us / baseline_us per adjacent pair; below 1 is faster"},
          {"median_ratio", ratio_ci.estimate},
          {"ratio_ci95", {ratio_ci.lo, ratio_ci.hi}},
          {"ci_method", ci_method_name(ratio_ci.method)},
          {"ci_seed", ratio_ci.seed},
          {"min_effect", min_effect},
          {"decision", decision_name(verdict)},
          {"stop_reason", stop_reason},
          {"check_failure", check_failure},
          {"checked_calls", checked_calls},
          {"wall_seconds", wall_seconds},
          {"baseline_us", a_us},
          {"candidate_us", b_us}};
}

paired_result measure_paired(gpu_timer& timer, const work_fn& a, const work_fn& b,
                             const paired_options& opt, const paired_hooks* hooks) {
  paired_result r;
  r.min_effect = opt.min_effect;
  if (hooks) hooks->before(0, timer.stream());
  auto pa = timer.prepare(a);
  if (hooks) {
    hooks->after(0, timer.stream());
    hooks->before(1, timer.stream());
  }
  auto pb = timer.prepare(b);
  if (hooks) {
    hooks->after(1, timer.stream());
    for (int m = 0; m < 2; ++m) {
      auto& p = m == 0 ? *pa : *pb;
      p.before = [hooks, m](cudaStream_t s) { hooks->before(m, s); };
      p.after = [hooks, m, &r](cudaStream_t s) {
        hooks->after(m, s);
        ++r.checked_calls;
      };
    }
  }
  auto check_failed = [&] {
    if (!hooks) return false;
    r.check_failure = hooks->failed();
    return !r.check_failure.empty();
  };
  for (int i = 0; i < timer.options().warmup; ++i) {
    (void)timer.sample(*pa);
    (void)timer.sample(*pb);
  }
  if (check_failed()) {
    r.stop_reason = "check_failed";
    return r;
  }
  rng order(opt.seed, stream_id("abba"));
  std::vector<timing_sample> all; // for the run's modal clock
  struct pair {
    timing_sample a, b;
  };
  std::vector<pair> pairs;
  const auto t0 = std::chrono::steady_clock::now();
  bootstrap_options bo;
  bo.resamples = 1000;
  bo.method = ci_method::percentile;
  // Blocks are taken five at a time (ten pairs, the stopping rule's cadence) and their CUPTI
  // records read together: a forced CUPTI flush per sample would cost more than most kernels.
  constexpr int blocks_per_batch = 5;
  for (;;) {
    // One block: ABBA or BAAB, chosen at random, gives two pairs.
    std::vector<gpu_timer::prepared*> batch;
    std::vector<bool> firsts;
    for (int blk = 0; blk < blocks_per_batch; ++blk) {
      const bool a_first = order.below(2) == 0;
      firsts.push_back(a_first);
      for (int k = 0; k < 4; ++k)
        batch.push_back((k == 0 || k == 3) == a_first ? pa.get() : pb.get());
    }
    const auto s = timer.sample_batch(batch);
    for (int blk = 0; blk < blocks_per_batch; ++blk) {
      const timing_sample* q = &s[static_cast<std::size_t>(4 * blk)];
      all.insert(all.end(), q, q + 4);
      pairs.push_back(firsts[blk] ? pair{q[0], q[1]} : pair{q[1], q[0]});
      pairs.push_back(firsts[blk] ? pair{q[3], q[2]} : pair{q[2], q[3]});
    }
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (check_failed()) {
      r.stop_reason = "check_failed";
      r.wall_seconds = wall;
      return r; // no ratio for a candidate that failed a check
    }
    if (stop_requested()) {
      r.stop_reason = "interrupted";
      break;
    }
    if (wall >= opt.max_wall_seconds) {
      r.stop_reason = "wall_cap";
      break;
    }
    if (static_cast<int>(pairs.size()) >= opt.max_pairs) {
      r.stop_reason = "max_pairs";
      break;
    }
    if (static_cast<int>(pairs.size()) >= opt.min_pairs) {
      std::vector<double> q;
      for (const auto& p : pairs)
        q.push_back(p.b.gpu_us / p.a.gpu_us);
      const auto ci = bootstrap_median(q, bo);
      if (0.5 * (ci.hi - ci.lo) / ci.estimate <= opt.target_rel_halfwidth) {
        r.stop_reason = "target_reached";
        break;
      }
    }
  }
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double modal = gpu_timer::apply_clock_floor(all, timer.options().clock_floor);
  for (const auto& p : pairs) {
    const double floor = timer.options().clock_floor * modal;
    if ((p.a.sm_mhz > 0 && p.a.sm_mhz < floor) || (p.b.sm_mhz > 0 && p.b.sm_mhz < floor)) {
      ++r.pairs_discarded;
      continue;
    }
    r.a_us.push_back(p.a.gpu_us);
    r.b_us.push_back(p.b.gpu_us);
    r.ratios.push_back(p.b.gpu_us / p.a.gpu_us);
  }
  if (r.ratios.size() < 2) throw timing_error("fewer than two pairs survived the clock floor");
  r.ratio_ci = bootstrap_paired_ratio(r.b_us, r.a_us);
  r.verdict = decide(r.ratio_ci.lo, r.ratio_ci.hi, opt.min_effect);
  return r;
}

} // namespace kg
