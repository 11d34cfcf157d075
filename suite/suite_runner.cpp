#include "suite/suite_runner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include "stats/bootstrap.h"
#include "timing/interrupt.h"

namespace kg {
namespace {

nlohmann::json record_head(const suite_workload& w) {
  return {{"type", "suite_workload"},
          {"id", w.id},
          {"level", w.level},
          {"kind", w.kind},
          {"params", w.params},
          {"metric",
           {{"name", w.metric.name}, {"direction", w.metric.direction}, {"unit", w.metric.unit}}}};
}

nlohmann::json gates_json(const std::vector<workload_gate>& gates) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& g : gates)
    out.push_back({{"name", g.name}, {"pass", g.pass}, {"detail", g.detail}});
  return out;
}

// A value in its unit with 4 significant digits; seconds shown in us or ms for readability.
std::string show_value(double v, const std::string& unit) {
  std::ostringstream s;
  s << std::setprecision(4);
  if (unit == "s") {
    if (v < 1e-3)
      s << v * 1e6 << " us";
    else if (v < 1)
      s << v * 1e3 << " ms";
    else
      s << v << " s";
  } else {
    s << v << " " << unit;
  }
  return s.str();
}

} // namespace

nlohmann::json make_suite_record(const suite_workload& w, const measured_workload& m,
                                 const nlohmann::json& roles, double wall_seconds) {
  if (m.samples.empty()) throw std::invalid_argument(w.id + ": no samples measured");
  auto r = record_head(w);
  r["samples"] = m.samples;
  if (!m.sample_keys.empty()) {
    if (m.sample_keys.size() != m.samples.size())
      throw std::invalid_argument(w.id + ": a sample key per sample, or none");
    r["sample_keys"] = m.sample_keys;
  }
  if (m.samples.size() >= 2) {
    const auto b = bootstrap_median(m.samples);
    r["estimate"] = b.estimate;
    r["ci95"] = {b.lo, b.hi};
  } else { // one sample: its value, no interval to give
    r["estimate"] = m.samples[0];
    r["ci95"] = {m.samples[0], m.samples[0]};
  }
  if (m.sol_bound) {
    auto sol = m.sol_detail;
    sol["bound"] = *m.sol_bound;
    // Bound over measured for time-like metrics, measured over bound for rates.
    const double est = r["estimate"].get<double>();
    sol["fraction"] = w.metric.direction == "lower" ? *m.sol_bound / est : est / *m.sol_bound;
    r["sol"] = sol;
  } else {
    r["sol"] = nullptr;
  }
  r["gates"] = gates_json(m.gates);
  r["roles"] = roles;
  r["extra"] = m.extra;
  r["wall_seconds"] = wall_seconds;
  return r;
}

nlohmann::json make_error_record(const suite_workload& w, const std::string& error,
                                 const nlohmann::json& roles, double wall_seconds) {
  auto r = record_head(w);
  r["error"] = error;
  r["sol"] = nullptr;
  r["gates"] = gates_json({{"measured", false, error}});
  r["roles"] = roles;
  r["wall_seconds"] = wall_seconds;
  return r;
}

bool record_gates_pass(const nlohmann::json& record) {
  if (record.contains("error")) return false;
  for (const auto& g : record.value("gates", nlohmann::json::array()))
    if (!g.value("pass", false)) return false;
  return true;
}

std::set<std::string> finished_ids(const std::vector<nlohmann::json>& records) {
  std::set<std::string> out;
  for (const auto& r : records)
    if (r.is_object() && r.value("type", "") == "suite_workload" && r.contains("id") &&
        r["id"].is_string())
      out.insert(r["id"].get<std::string>());
  return out;
}

namespace {
double total_cost(const std::vector<suite_workload>& to_run) {
  double c = 0;
  for (const auto& w : to_run)
    c += w.cost_seconds;
  return c;
}
} // namespace

suite_progress::suite_progress(std::ostream& out, bool terminal,
                               const std::vector<suite_workload>& to_run)
    : meter_(out, terminal, to_run.size(), total_cost(to_run)), total_(to_run.size()) {}

double suite_progress::eta_seconds() const {
  return meter_.eta_seconds();
}

std::string suite_progress::result_line(const nlohmann::json& r) {
  std::ostringstream s;
  if (r.contains("error")) {
    s << "ERROR " << r["error"].get<std::string>();
    return s.str();
  }
  const std::string unit = r["metric"]["unit"];
  s << show_value(r["estimate"].get<double>(), unit) << " [95% "
    << show_value(r["ci95"][0].get<double>(), unit) << ", "
    << show_value(r["ci95"][1].get<double>(), unit) << "]";
  if (r["sol"].is_object())
    s << "  SOL " << std::fixed << std::setprecision(1)
      << 100.0 * r["sol"]["fraction"].get<double>() << "%" << std::defaultfloat;
  int failed = 0;
  for (const auto& g : r["gates"])
    failed += !g["pass"].get<bool>();
  s << "  gates " << (failed ? "FAIL (" + std::to_string(failed) + ")" : std::string("pass"));
  return s.str();
}

void suite_progress::begin(const suite_workload& w) {
  meter_.start(w.id);
}

void suite_progress::end(const suite_workload& w, const nlohmann::json& record,
                         double wall_seconds) {
  std::ostringstream line;
  line << "[" << std::setw(3) << meter_.done_count() + 1 << "/" << total_ << "] " << std::left
       << std::setw(46) << w.id << std::right << " " << result_line(record) << "  (" << std::fixed
       << std::setprecision(1) << wall_seconds << " s)";
  meter_.done(line.str(), w.cost_seconds, wall_seconds);
}

void suite_progress::finish() {
  meter_.finish();
}

suite_loop_result run_suite_loop(const std::vector<suite_workload>& ordered,
                                 const std::set<std::string>& done, const workload_executor& run,
                                 const roles_fn& roles, result_writer& writer,
                                 suite_progress& progress) {
  suite_loop_result r;
  for (const auto& w : ordered) {
    if (done.count(w.id)) {
      ++r.skipped;
      continue;
    }
    if (stop_requested()) {
      r.interrupted = true;
      break;
    }
    progress.begin(w);
    const auto t0 = std::chrono::steady_clock::now();
    auto seconds = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    nlohmann::json record;
    try {
      const auto m = run(w);
      record = make_suite_record(w, m, roles(w), seconds());
    } catch (const interrupted_error&) {
      r.interrupted = true; // nothing recorded: a resume runs it again
      break;
    } catch (const std::exception& e) {
      record = make_error_record(w, e.what(), roles(w), seconds());
      ++r.errors;
    }
    writer.append(record);
    ++r.measured;
    r.gates_failed += !record_gates_pass(record);
    progress.end(w, record, record["wall_seconds"].get<double>());
  }
  progress.finish();
  return r;
}

} // namespace kg
