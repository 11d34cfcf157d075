#include "suite/history_command.h"

#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "reports/environment.h"
#include "reports/json_input.h"
#include "reports/result_writer.h"
#include "reports/run_history.h"
#include "reports/text_table.h"
#include "suite/exit_codes.h"

namespace kg {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

int fail(std::ostream& err, const std::string& why) {
  err << "kernelgate: history: " << printable(why, 400) << "\n";
  return exit_code::bad_input;
}

std::string significant(double v, int digits) {
  std::ostringstream o;
  o << std::setprecision(digits) << v;
  return o.str();
}

// Seconds read best scaled (1.888 us, not 1.888e-06 s); other units as they are.
std::string with_unit(double v, const std::string& unit) {
  if (unit != "s") return significant(v, 4) + (unit.empty() ? "" : " " + unit);
  const double a = std::fabs(v);
  if (a >= 1 || a == 0) return significant(v, 4) + " s";
  if (a >= 1e-3) return significant(v * 1e3, 4) + " ms";
  if (a >= 1e-6) return significant(v * 1e6, 4) + " us";
  return significant(v * 1e9, 4) + " ns";
}

std::string build_of(const history_point& p) {
  const std::string rev = p.revision.empty() ? "?" : p.revision.substr(0, 10);
  return rev + (p.dirty.value_or(false) ? "+dirty" : "");
}

std::string decision_cell(const history_point& p) {
  if (p.decision.empty()) return p.compared_with ? "-" : "first";
  std::string s = p.decision;
  if (p.ratio && p.ratio_lo && p.ratio_hi)
    s += " " + significant(*p.ratio, 4) + " [" + significant(*p.ratio_lo, 4) + ", " +
         significant(*p.ratio_hi, 4) + "]";
  return s;
}

std::string interval_cell(const history_point& p, const std::string& unit) {
  if (!p.ci_lo || !p.ci_hi) return "-";
  std::ostringstream o; // (not string +: GCC 12 warns falsely on "[" + std::string)
  o << "[" << with_unit(*p.ci_lo, unit) << ", " << with_unit(*p.ci_hi, unit) << "]";
  return o.str();
}

// One workload, every run: its trend.
void print_trend(std::ostream& out, const workload_history& w) {
  out << w.id;
  if (!w.metric.empty())
    out << " (" << w.metric << ", " << (w.direction == "higher" ? "higher" : "lower")
        << " is better)";
  out << "\n";
  text_table t({"run", "created", "build", "estimate", "ci95", "verdict", "vs previous run"});
  for (const auto& p : w.points)
    t.add_row({std::to_string(p.run_id), p.created, build_of(p),
               p.estimate ? with_unit(*p.estimate, w.unit) : "-", interval_cell(p, w.unit),
               !p.verdict.empty()               ? p.verdict
               : p.gates_pass && !*p.gates_pass ? "gates FAIL"
                                                : "",
               decision_cell(p)});
  out << t.render();
}

// An estimate, else an eval's or audit's verdict.
std::string value_cell(const history_point& p, const std::string& unit) {
  if (p.estimate) return with_unit(*p.estimate, unit);
  return p.verdict.empty() ? "-" : p.verdict;
}

// Every workload in one line each: runs, first and last estimate, the last decision.
void print_overview(std::ostream& out, const history_report& r) {
  text_table t({"workload", "runs", "first", "last", "last vs previous", "SLOWER runs"});
  for (const auto& w : r.workloads) {
    std::size_t slower = 0;
    for (const auto& p : w.points)
      slower += p.decision == "SLOWER";
    const auto& a = w.points.front();
    const auto& b = w.points.back();
    t.add_row({w.id, std::to_string(w.points.size()), value_cell(a, w.unit), value_cell(b, w.unit),
               decision_cell(b), std::to_string(slower)});
  }
  out << t.render();
}

void print_slower(std::ostream& out, const history_report& r) {
  std::vector<std::string> lines;
  for (const auto& w : r.workloads)
    for (const auto& p : w.points)
      if (p.decision == "SLOWER")
        lines.push_back(w.id + ": run " + std::to_string(p.run_id) + " (" + p.created + ", " +
                        build_of(p) + ") " + decision_cell(p) + " against run " +
                        std::to_string(p.compared_with.value_or(0)));
  out << "SLOWER than the previous run (" << lines.size() << ")" << (lines.empty() ? "" : ":")
      << "\n";
  for (const auto& l : lines)
    out << "  " << l << "\n";
}

void print_builds(std::ostream& out, const history_report& r) {
  out << "builds (" << r.builds.size() << "):\n";
  for (const auto& b : r.builds)
    out << "  " << (b.revision.empty() ? "?" : b.revision)
        << (b.dirty ? (*b.dirty ? " dirty" : " clean") : " dirty unknown") << ", " << b.runs
        << (b.runs == 1 ? " run, " : " runs, ") << b.first
        << (b.last != b.first ? " to " + b.last : "") << "\n";
}

int append_document(const std::string& file, const json& doc, std::ostream& out,
                    std::ostream& err) {
  try {
    auto h = run_history::open_for_append(file);
    const auto r = h.append(doc);
    out << "Appended run " << r.run_id << " (" << r.records << " records) to " << file;
    if (r.previous_run) out << ": " << r.slower << " SLOWER than run " << *r.previous_run;
    out << "\n";
    return exit_code::ok;
  } catch (const history_error& e) {
    return fail(err, std::string(e.what()) + " (the result stays written)");
  }
}

} // namespace

int run_history_command(const history_options& o, std::ostream& out, std::ostream& err) {
  if (o.append) {
    if (o.workload || o.since || o.json) return fail(err, "--append takes no query options");
    fs::path result(*o.append);
    std::error_code ec;
    if (fs::is_directory(result, ec)) result /= "result.json";
    return append_to_history_if_asked(o.file, result, out, err);
  }
  try {
    history_filter f;
    f.workload = o.workload;
    if (o.since) f.since = checked_since(*o.since);
    const auto h = run_history::open_existing(o.file);
    const auto r = h.query(f);
    if (o.workload && r.workloads.empty())
      return fail(err, "no run in '" + o.file + "' holds workload '" + *o.workload + "'" +
                           (o.since ? " since " + *o.since : ""));
    if (o.json) {
      auto j = history_report_json(r);
      j["database"] = o.file;
      j["runs"] = h.run_count();
      out << j.dump(2) << "\n";
      return exit_code::ok;
    }
    const auto runs = h.run_count();
    out << "history " << o.file << ": " << runs << (runs == 1 ? " run" : " runs") << " in all, "
        << r.workloads.size() << (r.workloads.size() == 1 ? " workload" : " workloads")
        << (o.since ? " since " + *o.since : "") << "\n";
    if (o.workload)
      for (const auto& w : r.workloads)
        print_trend(out, w);
    else if (!r.workloads.empty())
      print_overview(out, r);
    print_slower(out, r);
    print_builds(out, r);
    return exit_code::ok;
  } catch (const history_error& e) {
    return fail(err, e.what());
  }
}

int prepare_history(const std::string& file, std::ostream& err) {
  try {
    run_history::open_for_append(file);
    return exit_code::ok;
  } catch (const history_error& e) {
    return fail(err, e.what());
  }
}

int append_to_history_if_asked(const std::optional<std::string>& history,
                               const fs::path& result_json, std::ostream& out, std::ostream& err) {
  if (!history) return exit_code::ok;
  json doc;
  try {
    doc = read_json_file_checked(result_json);
  } catch (const json_input_error& e) {
    return fail(err, std::string("cannot append the run: ") + e.what());
  }
  return append_document(*history, doc, out, err);
}

int append_audit_checker_to_history(const std::optional<std::string>& history,
                                    const fs::path& out_dir, const std::string& checker,
                                    const std::vector<std::string>& argv, std::ostream& out,
                                    std::ostream& err) {
  if (!history) return exit_code::ok;
  json doc;
  try {
    const auto summary = read_json_file_checked(out_dir / "summary.json");
    json records = json::array();
    for (auto& r : read_records(out_dir / "verdicts.jsonl"))
      records.push_back(std::move(r));
    const auto now = utc_timestamp();
    doc = {{"schema", result_schema_id},
           {"kind", "audit_checker"},
           {"created", now},
           {"finished", now},
           {"argv", argv},
           {"environment", collect_environment()},
           {"config", {{"checker", checker}}},
           {"records", std::move(records)},
           {"summary", summary}};
  } catch (const std::exception& e) { // json_input_error, output_error
    return fail(err, std::string("cannot append the audit: ") + e.what());
  }
  return append_document(*history, doc, out, err);
}

json history_baseline(const std::string& file, const std::string& suite,
                      const std::optional<std::string>& revision, const std::string& before) {
  return run_history::open_existing(file).baseline_document(suite, revision, before);
}

} // namespace kg
