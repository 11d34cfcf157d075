// `kernelgate time --impl NAME [--vs NAME] [--clocks observe|require-locked|lock=MHz]
//                  [--backend auto|events|graph|cupti|counters] [--shape RxC]
//                  [--dtype float32|float16] [--min-effect F] [--out DIR]`
// Implementations are the LayerNorm kernels of the affine audit (the task catalog comes later).
#include "suite/time_command.h"

#include <charconv>
#include <iomanip>
#include <map>
#include <optional>
#include <ostream>
#include <sstream>

#include "gpu/device_buffer.h"
#include "gpu/device_info.h"
#include "kernels/layernorm_affine_cuda.h"
#include "reports/environment.h"
#include "reports/json_input.h"
#include "reports/result_writer.h"
#include "suite/exit_codes.h"
#include "suite/gpu_hold.h"
#include "suite/progress_meter.h"
#include "suite/timed_layernorm.h"
#include "timing/clock_policy.h"
#include "timing/gpu_timer.h"
#include "timing/interrupt.h"
#include "timing/paired.h"

namespace kg {
namespace {

struct timed_impl {
  affine_formula expected; // whose fp64 oracle defines a right output
  layernorm_launch launch;
};

std::map<std::string, timed_impl> registry() {
  std::map<std::string, timed_impl> r;
  r["layernorm"] = {affine_formula::reference, [](const layernorm_device_set& d, cudaStream_t s) {
                      launch_layernorm_affine(affine_formula::reference, d.type, d.x, d.w, d.b, d.y,
                                              d.rows, d.cols, 1e-5f, s);
                    }};
  r["layernorm-independent"] = {
      affine_formula::reference, [](const layernorm_device_set& d, cudaStream_t s) {
        launch_layernorm_independent(d.type, d.x, d.w, d.b, d.y, d.rows, d.cols, 1e-5f, s);
      }};
  for (const auto& f : altered_formulas()) {
    const affine_formula formula = f.formula;
    r["layernorm-" + std::string(f.name)] = {
        formula, [formula](const layernorm_device_set& d, cudaStream_t s) {
          launch_layernorm_affine(formula, d.type, d.x, d.w, d.b, d.y, d.rows, d.cols, 1e-5f, s);
        }};
  }
  return r;
}

std::optional<std::pair<std::int64_t, std::int64_t>> parse_shape(const std::string& s) {
  const auto x = s.find('x');
  if (x == std::string::npos) return std::nullopt;
  std::int64_t r = 0, c = 0;
  auto ok = [](const char* b, const char* e, std::int64_t& v) {
    const auto [p, ec] = std::from_chars(b, e, v);
    return ec == std::errc() && p == e && v > 0;
  };
  if (!ok(s.data(), s.data() + x, r) || !ok(s.data() + x + 1, s.data() + s.size(), c))
    return std::nullopt;
  return std::make_pair(r, c);
}

std::string fmt(double v, int precision = 2) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(precision) << v;
  return o.str();
}

void print_result(std::ostream& out, const std::string& name, const timing_result& r) {
  if (const auto w = clock_variation_warning(r); !w.empty())
    out << "warning: " << name << ": " << w << "\n";
  out << name << ": median " << fmt(r.summary.median, 3) << " us, 95% CI ["
      << fmt(r.median_ci.lo, 3) << ", " << fmt(r.median_ci.hi, 3) << "], " << r.kept_us.size()
      << " samples kept, " << r.discarded << " discarded, SM clock " << fmt(r.min_mhz, 0) << "-"
      << fmt(r.max_mhz, 0) << " MHz (modal " << fmt(r.modal_mhz, 0) << "), backend " << r.backend
      << ", stop " << r.stop_reason << ", activity audit " << r.activity_audit << "\n";
}

} // namespace

std::vector<std::string> timed_implementation_names() {
  std::vector<std::string> n;
  for (const auto& [k, v] : registry())
    n.push_back(k);
  return n;
}

int run_time_command(const time_options& o, const std::vector<std::string>& args, std::ostream& out,
                     std::ostream& err) {
  const auto impls = registry();
  for (const std::string* n : {&o.impl, &o.vs}) {
    if ((n == &o.impl || !n->empty()) && !impls.count(*n)) {
      std::string known;
      for (const auto& [name, f] : impls)
        known += (known.empty() ? "" : ", ") + name;
      err << "kernelgate: unknown implementation '" << printable(*n) << "' (known: " << known
          << ")\n";
      return exit_code::bad_input;
    }
  }
  const auto policy = parse_clock_policy(o.clocks);
  const auto backend = parse_timing_backend(o.backend);
  const auto shape = parse_shape(o.shape);
  const auto type = parse_dtype(o.dtype);
  const double min_effect = o.min_effect;
  std::string bad;
  if (!policy)
    bad = "--clocks '" + o.clocks + "' (observe, require-locked, lock=<MHz>)";
  else if (!backend)
    bad = "--backend '" + o.backend + "' (auto, events, graph, cupti, counters)";
  else if (!shape)
    bad = "--shape '" + o.shape + "' (ROWSxCOLS)";
  else if (!type || (*type != dtype::float32 && *type != dtype::float16))
    bad = "--dtype '" + o.dtype + "' (float32, float16)";
  if (!bad.empty()) {
    err << "kernelgate: invalid " << printable(bad) << "\n";
    return exit_code::bad_input;
  }
  const auto gpu = take_gpu(*policy, "no GPU to time on", err);
  if (!gpu) return exit_code::unavailable;
  timing_options topt;
  topt.backend = *backend;
  std::unique_ptr<gpu_timer> timer_holder;
  try {
    timer_holder = std::make_unique<gpu_timer>(topt);
  } catch (const timing_error& e) { // e.g. --backend cupti under another profiler
    err << "kernelgate: " << printable(e.what(), 400) << "\n";
    return exit_code::unavailable;
  }
  gpu_timer& timer = *timer_holder;
  const layernorm_config cfg{shape->first, shape->second, *type, 42};
  const std::string out_dir = o.out.empty() ? "kg-out/time-" + o.impl : o.out;
  nlohmann::json config = {{"impl", o.impl},
                           {"vs", o.vs},
                           {"shape", {cfg.rows, cfg.cols}},
                           {"dtype", dtype_name(cfg.type)},
                           {"clocks", policy->name()},
                           {"clock_policy_note", gpu->clocks_note()},
                           {"timing", topt.to_json()},
                           {"min_effect", min_effect}};
  std::unique_ptr<result_writer> writer;
  try {
    writer = std::make_unique<result_writer>(out_dir, "time", args, collect_environment(), config);
  } catch (const output_error& e) {
    err << "kernelgate: " << printable(e.what(), 400) << "\n";
    return exit_code::bad_input;
  }
  nlohmann::json summary = {{"status", "complete"}};
  // Three phases with --vs (each kernel alone, then the ABBA pairs), one without.
  progress_meter meter(out, progress_bar_wanted(out, o.no_progress), o.vs.empty() ? 1 : 3);
  auto result_text = [](const std::string& name, const timing_result& r) {
    std::ostringstream s;
    print_result(s, name, r);
    auto t = s.str();
    if (!t.empty() && t.back() == '\n') t.pop_back();
    return t;
  };
  try {
    const timed_impl& impl = impls.at(o.impl);
    timed_layernorm problem(cfg, impl.expected);
    meter.start("timing " + o.impl);
    const auto r = timer.measure_honest(problem.work(impl.launch));
    writer->append({{"type", "timing"},
                    {"id", "timing/" + o.impl},
                    {"impl", o.impl},
                    {"result", r.to_json()}});
    if (r.status != "TIMED") {
      summary["status"] = "failed";
      summary[o.impl] = {{"status", r.status}, {"status_reason", r.status_reason}};
      writer->finish(summary);
      err << "kernelgate: " << o.impl << ": " << r.status << ": " << r.status_reason << "\n";
      return exit_code::failures;
    }
    meter.done(result_text(o.impl, r));
    summary[o.impl] = r.to_json(false);
    if (stop_requested()) { // SIGINT/SIGTERM: the samples so far are written, marked incomplete
      summary["status"] = "interrupted";
      writer->finish(summary);
      err << "kernelgate: interrupted; partial result in " << printable(out_dir) << "\n";
      return exit_code::interrupted;
    }
    if (!o.vs.empty()) {
      const timed_impl& base = impls.at(o.vs);
      timed_layernorm base_problem(cfg, base.expected);
      meter.start("timing " + o.vs);
      const auto rv = timer.measure_honest(base_problem.work(base.launch));
      writer->append(
          {{"type", "timing"}, {"id", "timing/" + o.vs}, {"impl", o.vs}, {"result", rv.to_json()}});
      if (rv.status != "TIMED") {
        summary["status"] = "failed";
        writer->finish(summary);
        err << "kernelgate: " << o.vs << ": " << rv.status << ": " << rv.status_reason << "\n";
        return exit_code::failures;
      }
      meter.done(result_text(o.vs, rv));
      meter.start("ABBA pairs " + o.impl + " / " + o.vs);
      // Both on input set 0 (the same seed: the same contents) in their first buffers.
      const auto cand_set = problem.staged(0, 0, timer.stream()),
                 base_set = base_problem.staged(0, 0, timer.stream());
      const work_fn work = [&](cudaStream_t s) { impl.launch(cand_set, s); };
      const work_fn other = [&](cudaStream_t s) { base.launch(base_set, s); };
      paired_options po;
      po.min_effect = min_effect;
      // Baseline is --vs, candidate is --impl: the ratio says how --impl compares with it.
      const auto p = measure_paired(timer, other, work, po);
      std::ostringstream line;
      line << o.impl << " vs " << o.vs << ": time ratio " << fmt(p.ratio_ci.estimate, 4)
           << ", 95% CI [" << fmt(p.ratio_ci.lo, 4) << ", " << fmt(p.ratio_ci.hi, 4) << "] over "
           << p.ratios.size() << " ABBA pairs (" << p.pairs_discarded << " discarded), min effect "
           << fmt(100 * min_effect, 1) << "%: " << decision_name(p.verdict);
      meter.done(line.str());
      writer->append({{"type", "comparison"},
                      {"id", "comparison/" + o.impl + "/" + o.vs},
                      {"candidate", o.impl},
                      {"baseline", o.vs},
                      {"result", p.to_json()}});
      summary["comparison"] = {{"decision", decision_name(p.verdict)},
                               {"median_ratio", p.ratio_ci.estimate},
                               {"ratio_ci95", {p.ratio_ci.lo, p.ratio_ci.hi}}};
    }
  } catch (const std::exception& e) {
    summary["status"] = "failed";
    summary["error"] = e.what();
    writer->finish(summary);
    err << "kernelgate: timing failed: " << e.what() << "\n";
    return exit_code::failures;
  }
  const auto path = writer->finish(summary);
  out << "Wrote " << path.string() << "\n";
  return exit_code::ok;
}

} // namespace kg
