#include "suite/compare_command.h"

#include <cmath>
#include <iomanip>
#include <memory>
#include <ostream>
#include <sstream>

#include "reports/colocation.h"
#include "reports/environment.h"
#include "reports/json_input.h"
#include "reports/result_writer.h"
#include "reports/run_compare.h"
#include "reports/run_history.h"
#include "reports/text_table.h"
#include "suite/exit_codes.h"
#include "suite/history_command.h"

namespace kg {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string significant(double v, int digits) {
  std::ostringstream o;
  o << std::setprecision(digits) << v;
  return o.str();
}

std::string fixed(double v, int precision) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(precision) << v;
  return o.str();
}

// Seconds read best scaled (12.34 us, not 1.234e-05 s); other units as they are.
std::string with_unit(double v, const std::string& unit) {
  if (unit != "s") return significant(v, 4) + " " + unit;
  const double a = std::fabs(v);
  if (a >= 1 || a == 0) return significant(v, 4) + " s";
  if (a >= 1e-3) return significant(v * 1e3, 4) + " ms";
  if (a >= 1e-6) return significant(v * 1e6, 4) + " us";
  return significant(v * 1e9, 4) + " ns";
}

std::string median_cell(const std::optional<side_summary>& s, const std::string& unit) {
  if (!s || !s->median) return "-";
  return with_unit(*s->median, unit);
}

std::string ratio_cell(const workload_comparison& w) {
  if (!w.ratio) return "-";
  // "p": the samples were paired by key (the same arrival seed on both sides).
  return fixed(w.ratio->ratio, 3) + " [" + fixed(w.ratio->lo, 3) + ", " + fixed(w.ratio->hi, 3) +
         "]" + (w.ratio->paired ? " p" : "");
}

std::string pass_text(const std::optional<bool>& p) {
  return p ? (*p ? "pass" : "FAIL") : "absent";
}

std::string gate_cell(const workload_comparison& w) {
  std::string s;
  for (const auto& g : w.gate_changes)
    s += (s.empty() ? "" : ", ") + g.name + " " + pass_text(g.base_pass) + "->" +
         pass_text(g.new_pass);
  return s;
}

// A folder given as BASE or NEW, or the folder of a result.json given, as one canonical path.
fs::path run_folder(const std::string& arg) {
  std::error_code ec;
  const fs::path p(arg);
  const fs::path folder = fs::is_directory(p, ec) ? p : p.parent_path();
  return fs::weakly_canonical(folder.empty() ? fs::path(".") : folder, ec);
}

// --out must not be a compared run's folder: writing there would replace that run's result.json.
std::string out_conflict(const compare_command_options& o) {
  if (!o.out) return "";
  std::error_code ec;
  const auto out = fs::weakly_canonical(*o.out, ec);
  for (const auto& [label, arg] : {std::pair{"BASE", o.base}, std::pair{"NEW", o.next}})
    if (!arg.empty() && out == run_folder(arg))
      return "--out '" + printable(o.out->string()) + "' is " + label +
             "'s folder: writing there would replace the run's result.json";
  return "";
}

std::string text_of(const json& obj, const char* key) {
  const auto v = obj.value(key, json());
  return v.is_string() ? printable(v.get<std::string>()) : v.is_null() ? "?" : v.dump();
}

void print_run(std::ostream& out, const char* tag, const suite_run_result& r) {
  out << tag << r.file.string() << " (suite " << text_of(r.config, "suite") << ", "
      << r.records.size() << " workloads, " << text_of(r.summary, "status") << ")\n";
}

// The table pads every cell, and the last column (gate changes) is empty on most rows.
std::string without_trailing_spaces(const std::string& text) {
  std::string out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    out += line.substr(0, line.find_last_not_of(' ') + 1) + "\n";
  return out;
}

void print_table(std::ostream& out, const run_comparison& c) {
  text_table t(
      {"id", "metric", "base median", "new median", "ratio [95%]", "decision", "gate changes"});
  for (const auto& w : c.workloads) {
    if (w.status == compare_status::missing) continue;
    const auto unit = w.metric["unit"].get<std::string>();
    t.add_row({w.id, w.metric["name"].get<std::string>(), median_cell(w.base, unit),
               median_cell(w.next, unit), ratio_cell(w), std::string(compare_status_name(w.status)),
               gate_cell(w)});
  }
  out << without_trailing_spaces(t.render());
}

void print_list(std::ostream& out, const std::string& title, const std::vector<std::string>& ids) {
  if (ids.empty()) return;
  out << title << " (" << ids.size() << "):\n";
  for (const auto& id : ids)
    out << "  " << id << "\n";
}

// Everything the table cannot say in a cell: why a workload has no decision, what is missing,
// which gates fail in NEW, how the environments differ.
void print_lists(std::ostream& out, const run_comparison& c) {
  std::vector<std::string> no_ratio, failing;
  for (const auto& w : c.workloads) {
    if (w.status == compare_status::no_data || w.status == compare_status::incomparable)
      no_ratio.push_back(w.id + ": " + std::string(compare_status_name(w.status)) + ", " + w.why);
    if (!w.failing_gates_new.empty()) {
      std::string names;
      for (const auto& g : w.failing_gates_new)
        names += (names.empty() ? "" : ", ") + g;
      failing.push_back(w.id + ": " + names);
    }
  }
  print_list(out, "no decision", no_ratio);
  print_list(out, "only in BASE, missing in NEW", c.only_in_base);
  print_list(out, "only in NEW, missing in BASE", c.only_in_new);
  print_list(out, "gates failing in NEW", failing);
  std::vector<std::string> clocks;
  for (const auto& w : c.workloads)
    if (const auto shift = w.clock_shift(); shift && std::abs(*shift) > clock_shift_threshold)
      clocks.push_back(w.id + ": " + fixed(*w.base->sm_mhz, 0) + " -> " +
                       fixed(*w.next->sm_mhz, 0) + " MHz (" + (*shift > 0 ? "+" : "") +
                       fixed(100.0 * *shift, 1) + "%), " +
                       std::string(compare_status_name(w.status)));
  print_list(out,
             "SM clock moved by more than " + fixed(100.0 * clock_shift_threshold, 0) +
                 "% (BASE -> NEW, the workload's median)",
             clocks);
  std::vector<std::string> env;
  for (const auto& d : c.environment_differences)
    env.push_back(d.field + ": BASE " + printable(d.base.dump()) + ", NEW " +
                  printable(d.next.dump()));
  print_list(out, "environment differs (compared anyway: --allow-env-change)", env);
}

void print_text(std::ostream& out, const suite_run_result& base, const suite_run_result& next,
                const run_comparison& c) {
  print_run(out, "BASE: ", base);
  print_run(out, "NEW:  ", next);
  for (const auto* r : {&base, &next})
    if (r->summary.value("status", json()) != "complete")
      out << "note: " << r->label << "'s run did not complete (summary.status "
          << text_of(r->summary, "status") << "): what it did not reach is listed as missing\n";
  out << "ratio: NEW/BASE for lower-is-better metrics, BASE/NEW for higher-is-better (above 1 is "
         "worse), median over median with its 95% bootstrap interval; min effect "
      << significant(100 * c.options.min_effect, 4) << "%\n";
  print_table(out, c);
  print_lists(out, c);
  out << colocation_change_text(colocation_fractions(base.records),
                                colocation_fractions(next.records));
  out << compare_summary_line(c) << "\n";
}

// compare's summary with each run's fractions of solo (reports/colocation.h).
json summary_with_colocation(const suite_run_result& base, const suite_run_result& next,
                             const run_comparison& c) {
  auto s = compare_summary(c);
  s["colocation"] = {{"base", to_json(colocation_fractions(base.records))},
                     {"new", to_json(colocation_fractions(next.records))}};
  return s;
}

json machine_form(const suite_run_result& base, const suite_run_result& next,
                  const run_comparison& c) {
  json records = json::array();
  for (const auto& w : c.workloads)
    records.push_back(compare_record(w));
  return {{"config", compare_config(base, next, c.options)},
          {"records", std::move(records)},
          {"summary", summary_with_colocation(base, next, c)}};
}

// The result file: one record per workload id, streamed, then the summary.
fs::path write_result(result_writer& w, const suite_run_result& base, const suite_run_result& next,
                      const run_comparison& c) {
  for (const auto& wc : c.workloads)
    w.append(compare_record(wc));
  return w.finish(summary_with_colocation(base, next, c));
}

int fail(std::ostream& err, const std::string& why) {
  err << "kernelgate: compare: " << printable(why, 400) << "\n";
  return exit_code::bad_input;
}

// BASE NEW, or NEW alone with --baseline-from: "" or why the positionals do not fit.
std::string positional_problem(compare_command_options& o) {
  if (o.baseline_rev && !o.baseline_from) return "--baseline-rev needs --baseline-from FILE";
  if (!o.baseline_from)
    return o.next.empty() ? "BASE and NEW are required (or NEW with --baseline-from)" : "";
  if (!o.next.empty()) return "with --baseline-from give NEW only, not BASE NEW";
  if (o.base.empty()) return "NEW is required";
  o.next = std::exchange(o.base, "");
  return "";
}

// BASE rebuilt from the history: the run of NEW's suite that --baseline-from/--baseline-rev
// name. Throws compare_input_error (a history_error is bad input the same way).
suite_run_result history_base(const compare_command_options& o, const suite_run_result& next) {
  const auto suite = next.config.value("suite", nlohmann::json());
  if (!suite.is_string()) throw compare_input_error("NEW names no suite (config.suite)");
  try {
    const auto doc =
        history_baseline(*o.baseline_from, suite.get<std::string>(), o.baseline_rev,
                         next.created.is_string() ? next.created.get<std::string>() : "");
    return suite_run_from_document(
        doc, *o.baseline_from + "#run" + std::to_string(doc["history"]["run_id"].get<long>()),
        "BASE");
  } catch (const history_error& e) {
    throw compare_input_error(e.what());
  }
}

} // namespace

int run_compare_command(const compare_command_options& given, const std::vector<std::string>& argv,
                        std::ostream& out, std::ostream& err) {
  auto o = given;
  if (const auto why = positional_problem(o); !why.empty()) return fail(err, why);
  if (const auto why = out_conflict(o); !why.empty()) return fail(err, why);
  // As every command with --out: an old result.json goes before any other check.
  if (o.out)
    if (const auto why = remove_stale_result(*o.out); !why.empty()) return fail(err, why);
  compare_options opt;
  opt.min_effect = o.min_effect;
  opt.allow_env_change = o.allow_env_change;
  opt.resamples = o.resamples;
  std::optional<suite_run_result> base, next;
  std::optional<run_comparison> c;
  try {
    next = load_suite_run(o.next, "NEW");
    base = o.baseline_from ? history_base(o, *next) : load_suite_run(o.base, "BASE");
    c = compare_runs(*base, *next, opt);
  } catch (const compare_input_error& e) {
    return fail(err, e.what());
  }
  // The output folder is set up before anything is printed, so an unusable one is bad input
  // that leaves no result.json.
  std::unique_ptr<result_writer> writer;
  if (o.out) {
    try {
      writer = std::make_unique<result_writer>(*o.out, "compare", argv, collect_environment(),
                                               compare_config(*base, *next, opt));
    } catch (const output_error& e) {
      return fail(err, e.what());
    }
  }
  if (o.json)
    out << machine_form(*base, *next, *c).dump(2) << "\n";
  else
    print_text(out, *base, *next, *c);
  if (writer) {
    const auto path = write_result(*writer, *base, *next, *c);
    if (!o.json) out << "Wrote " << path.string() << "\n";
  }
  return c->fails() ? exit_code::failures : exit_code::ok;
}

} // namespace kg
