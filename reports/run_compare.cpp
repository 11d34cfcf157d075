#include "reports/run_compare.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "base/name_table.h"
#include "base/rng.h"
#include "base/sha256.h"
#include "reports/json_input.h"
#include "reports/result_writer.h"
#include "stats/bootstrap.h"
#include "stats/summary.h"

namespace kg {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr name_table<compare_status, 7> status_names{
    {{compare_status::faster, "FASTER"},
     {compare_status::slower, "SLOWER"},
     {compare_status::same, "SAME"},
     {compare_status::ambiguous, "AMBIGUOUS"},
     {compare_status::no_data, "NO_DATA"},
     {compare_status::incomparable, "INCOMPARABLE"},
     {compare_status::missing, "MISSING"}}};

constexpr const char* record_type = "suite_workload";

std::string quoted(const std::string& s) {
  return "'" + printable(s) + "'";
}

// ---- loading ---------------------------------------------------------------------------------

// The result.json that `path` names: the file itself, or the one in the folder.
fs::path locate_result(const fs::path& path, const std::string& label) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (!fs::exists(st)) throw compare_input_error(label + " " + quoted(path) + " does not exist");
  if (!fs::is_directory(st)) return path;
  if (fs::exists(path / "result.json", ec)) return path / "result.json";
  // records.jsonl alone is a run cut short: its environment and configuration, which the
  // comparison must check, are only written with result.json at the end.
  if (fs::exists(path / "records.jsonl", ec))
    throw compare_input_error(label + " " + quoted(path) +
                              " has no result.json (the run did not finish); resume it first");
  throw compare_input_error(label + " " + quoted(path) + " is a folder without result.json");
}

// Throws a one-line error about record `index` of the run.
[[noreturn]] void bad_record(const suite_run_result& r, std::size_t index, const json& rec,
                             const std::string& problem) {
  std::string who = "record " + std::to_string(index);
  if (rec.is_object() && rec.contains("id") && rec["id"].is_string())
    who += " (" + quoted(rec["id"].get<std::string>()) + ")";
  throw compare_input_error(r.label + " " + quoted(r.file) + ": " + who + ": " + problem);
}

bool is_string_field(const json& obj, const char* key) {
  return obj.contains(key) && obj[key].is_string();
}

void check_metric(const suite_run_result& r, std::size_t i, const json& rec) {
  if (!rec.contains("metric") || !rec["metric"].is_object())
    bad_record(r, i, rec, "no \"metric\" object");
  const auto& m = rec["metric"];
  for (const char* key : {"name", "direction", "unit"})
    if (!is_string_field(m, key))
      bad_record(r, i, rec, std::string("metric.") + key + " is not a string");
  const auto dir = m["direction"].get<std::string>();
  if (dir != "lower" && dir != "higher")
    bad_record(r, i, rec, "metric.direction is " + quoted(dir) + ", not \"lower\" or \"higher\"");
}

void check_samples_and_gates(const suite_run_result& r, std::size_t i, const json& rec) {
  if (rec.contains("samples")) {
    if (!rec["samples"].is_array()) bad_record(r, i, rec, "\"samples\" is not an array");
    for (const auto& s : rec["samples"])
      if (!s.is_number()) bad_record(r, i, rec, "\"samples\" holds a value that is not a number");
  }
  if (rec.contains("gates")) {
    if (!rec["gates"].is_array()) bad_record(r, i, rec, "\"gates\" is not an array");
    for (const auto& g : rec["gates"])
      if (!g.is_object() || !is_string_field(g, "name") || !g.contains("pass") ||
          !g["pass"].is_boolean())
        bad_record(r, i, rec, "a gate is not {\"name\": string, \"pass\": bool, ...}");
  }
  if (rec.contains("error") && !rec["error"].is_string())
    bad_record(r, i, rec, "\"error\" is not a string");
  if (rec.contains("sample_keys")) {
    const auto& k = rec["sample_keys"];
    if (!k.is_array() || !rec.contains("samples") || k.size() != rec["samples"].size())
      bad_record(r, i, rec, "\"sample_keys\" is not an array as long as \"samples\"");
    std::set<std::string> seen;
    for (const auto& key : k)
      if (!seen.insert(key.dump()).second)
        bad_record(r, i, rec, "\"sample_keys\" names a key twice: " + key.dump());
  }
}

// Keeps the workload records, each checked for the fields the comparison reads; a record of
// another type (a later version's extra records) is not a workload and is skipped.
void take_records(suite_run_result& r, const json& records) {
  std::map<std::string, std::size_t> first_seen;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const auto& rec = records[i];
    if (!rec.is_object() || !is_string_field(rec, "type"))
      bad_record(r, i, rec, "not an object with a \"type\"");
    if (rec["type"] != record_type) continue;
    if (!is_string_field(rec, "id") || rec["id"].get<std::string>().empty())
      bad_record(r, i, rec, "no workload \"id\"");
    check_metric(r, i, rec);
    check_samples_and_gates(r, i, rec);
    const auto [it, fresh] = first_seen.emplace(rec["id"].get<std::string>(), i);
    if (!fresh)
      bad_record(r, i, rec,
                 "the id appears twice (records " + std::to_string(it->second) + " and " +
                     std::to_string(i) + ")");
    r.records.push_back(rec);
  }
}

void check_envelope(const suite_run_result& r, const json& doc) {
  const std::string where = r.label + " " + quoted(r.file);
  if (!doc.is_object() || doc.value("schema", json()) != result_schema_id)
    throw compare_input_error(where + " is not a kernelgate result (no \"schema\": \"" +
                              result_schema_id + "\")");
  const auto kind = doc.value("kind", json());
  if (kind != "suite_run")
    throw compare_input_error(where + " is a " +
                              (kind.is_string() ? quoted(kind.get<std::string>()) : "kindless") +
                              " result, not a suite run (kernelgate run writes those)");
  for (const char* key : {"environment", "config", "summary"})
    if (!doc.contains(key) || !doc[key].is_object())
      throw compare_input_error(where + ": \"" + key + "\" is not an object");
  if (!doc.contains("records") || !doc["records"].is_array())
    throw compare_input_error(where + ": \"records\" is not an array");
}

// ---- environment -----------------------------------------------------------------------------

struct checked_field {
  const char* name;    // as messages and results name it
  const char* pointer; // within environment or config
  bool in_config;
};

constexpr checked_field checked_fields[] = {
    {"environment.gpu.name", "/gpu/name", false},
    {"environment.driver.nvml_driver_version", "/driver/nvml_driver_version", false},
    {"environment.driver.cuda_driver_version", "/driver/cuda_driver_version", false},
    {"config.clock_policy", "/clock_policy", true},
    {"environment.clocks.locked", "/clocks/locked", false},
};

json value_at(const suite_run_result& r, const checked_field& f) {
  const json& root = f.in_config ? r.config : r.environment;
  const json::json_pointer p(f.pointer);
  return root.contains(p) ? root[p] : json();
}

// Absent and "unavailable" both say the value is unknown; two unknowns do not differ.
bool unknown(const json& v) {
  return v.is_null() || v == "unavailable";
}

bool same_value(const json& a, const json& b) {
  return (unknown(a) && unknown(b)) || a == b;
}

// ---- one workload ----------------------------------------------------------------------------

std::vector<double> samples_of(const json& rec) {
  std::vector<double> s;
  if (rec.contains("samples"))
    for (const auto& v : rec["samples"])
      s.push_back(v.get<double>());
  return s;
}

// The record's SM clock: the clock watch's median, else the kernel timer's modal clock; a value
// that is not a positive number counts as none.
std::optional<double> sm_mhz_of(const json& rec) {
  const auto extra = rec.value("extra", json::object());
  if (!extra.is_object()) return std::nullopt;
  json v;
  if (extra.contains("gpu_clocks") && extra["gpu_clocks"].is_object() &&
      extra["gpu_clocks"].contains("sm_mhz") && extra["gpu_clocks"]["sm_mhz"].is_object())
    v = extra["gpu_clocks"]["sm_mhz"].value("median", json());
  else if (extra.contains("timing") && extra["timing"].is_object())
    v = extra["timing"].value("modal_sm_mhz", json());
  if (v.is_number() && v.get<double>() > 0) return v.get<double>();
  return std::nullopt;
}

side_summary summarize_side(const json& rec) {
  side_summary s;
  const auto x = samples_of(rec);
  s.samples = x.size();
  if (!x.empty()) s.median = median(x);
  if (rec.contains("error")) s.error = rec["error"].get<std::string>();
  s.sm_mhz = sm_mhz_of(rec);
  return s;
}

std::map<std::string, bool> gates_of(const json& rec) {
  std::map<std::string, bool> g;
  if (rec.contains("gates"))
    for (const auto& gate : rec["gates"])
      g[gate["name"].get<std::string>()] = gate["pass"].get<bool>();
  return g;
}

std::vector<std::string> failing_gates(const json& rec) {
  std::vector<std::string> f;
  for (const auto& [name, pass] : gates_of(rec))
    if (!pass) f.push_back(name);
  return f;
}

std::vector<gate_change> gate_changes(const json& base, const json& next) {
  const auto b = gates_of(base), n = gates_of(next);
  std::set<std::string> names;
  for (const auto& [name, pass] : b)
    names.insert(name);
  for (const auto& [name, pass] : n)
    names.insert(name);
  std::vector<gate_change> out;
  for (const auto& name : names) {
    gate_change c{name, std::nullopt, std::nullopt};
    if (b.count(name)) c.base_pass = b.at(name);
    if (n.count(name)) c.new_pass = n.at(name);
    if (c.base_pass != c.new_pass) out.push_back(std::move(c));
  }
  return out;
}

std::string metric_text(const json& m) {
  return m["name"].get<std::string>() + " (" + m["unit"].get<std::string>() + ", " +
         m["direction"].get<std::string>() + " is better)";
}

// Why a side's samples cannot give a ratio, or "" when they can.
std::string unusable(const std::string& label, const side_summary& s,
                     const std::vector<double>& x) {
  if (s.error) return "error in " + label + ": " + printable(*s.error);
  if (x.size() < 2)
    return label + " has " + std::to_string(x.size()) + " sample" + (x.size() == 1 ? "" : "s") +
           " (2 needed)";
  if (std::any_of(x.begin(), x.end(), [](double v) { return !(v > 0); }))
    return label + " has samples <= 0 (a ratio needs positive values)";
  return "";
}

// NEW's samples in BASE's key order, when both records name the same sample keys (serving: the
// arrival seeds); none otherwise.
std::optional<std::vector<double>> paired_samples(const json& base, const json& next,
                                                  const std::vector<double>& xn) {
  if (!base.contains("sample_keys") || !next.contains("sample_keys")) return std::nullopt;
  std::map<std::string, double> by_key;
  const auto& kn = next["sample_keys"];
  for (std::size_t i = 0; i < kn.size(); ++i)
    by_key[kn[i].dump()] = xn[i];
  const auto& kb = base["sample_keys"];
  if (kb.size() != kn.size()) return std::nullopt;
  std::vector<double> aligned;
  for (const auto& key : kb) {
    const auto it = by_key.find(key.dump());
    if (it == by_key.end()) return std::nullopt;
    aligned.push_back(it->second);
  }
  return aligned;
}

compare_status status_of(decision d) {
  switch (d) {
  case decision::faster:
    return compare_status::faster;
  case decision::slower:
    return compare_status::slower;
  case decision::same:
    return compare_status::same;
  case decision::ambiguous:
    break;
  }
  return compare_status::ambiguous;
}

workload_comparison compare_pair(const json& base, const json& next, const compare_options& opt) {
  workload_comparison w;
  w.id = next["id"].get<std::string>();
  w.metric = next["metric"];
  w.base = summarize_side(base);
  w.next = summarize_side(next);
  w.gate_changes = gate_changes(base, next);
  w.failing_gates_new = failing_gates(next);
  if (base["metric"] != next["metric"]) {
    w.status = compare_status::incomparable;
    w.why = "metric differs: BASE " + metric_text(base["metric"]) + ", NEW " +
            metric_text(next["metric"]);
    return w;
  }
  const auto xb = samples_of(base), xn = samples_of(next);
  w.why = unusable("BASE", *w.base, xb);
  if (w.why.empty()) w.why = unusable("NEW", *w.next, xn);
  if (!w.why.empty()) {
    w.status = compare_status::no_data;
    return w;
  }
  const auto dir = w.metric["direction"].get<std::string>();
  if (const auto aligned = paired_samples(base, next, xn))
    w.ratio = decide_paired_ratio(xb, *aligned, dir, w.id, opt);
  else
    w.ratio = decide_ratio(xb, xn, dir, w.id, opt);
  w.status = status_of(w.ratio->verdict);
  return w;
}

workload_comparison one_sided(const json& rec, bool in_base) {
  workload_comparison w;
  w.id = rec["id"].get<std::string>();
  w.metric = rec["metric"];
  w.status = compare_status::missing;
  w.missing_from = in_base ? "NEW" : "BASE";
  w.why = "not in " + w.missing_from + "'s run";
  (in_base ? w.base : w.next) = summarize_side(rec);
  // A workload only NEW ran is still gated: its failing gates fail the comparison.
  if (!in_base) w.failing_gates_new = failing_gates(rec);
  return w;
}

std::map<std::string, const json*> by_id(const suite_run_result& r) {
  std::map<std::string, const json*> m;
  for (const auto& rec : r.records)
    m[rec["id"].get<std::string>()] = &rec;
  return m;
}

void check_options(const compare_options& opt) {
  if (!(opt.min_effect >= 0 && opt.min_effect < 1))
    throw compare_input_error("--min-effect must be a fraction in [0, 1)");
  if (opt.resamples < 100) throw compare_input_error("bootstrap resamples must be >= 100");
}

std::string refusal(const std::vector<environment_difference>& diffs) {
  std::string s = "BASE and NEW ran in different environments:";
  for (std::size_t i = 0; i < diffs.size(); ++i)
    s += (i ? "; " : " ") + diffs[i].field + " " + printable(diffs[i].base.dump()) + " vs " +
         printable(diffs[i].next.dump());
  return s + " (--allow-env-change compares them anyway)";
}

// ---- result pieces ---------------------------------------------------------------------------

json pass_word(const std::optional<bool>& p) {
  return p ? json(*p ? "pass" : "fail") : json("absent");
}

json side_json(const std::optional<side_summary>& s) {
  if (!s) return nullptr;
  json j = {{"samples", s->samples},
            {"median", s->median ? json(*s->median) : json(nullptr)},
            {"sm_mhz", s->sm_mhz ? json(*s->sm_mhz) : json(nullptr)}};
  if (s->error) j["error"] = *s->error;
  return j;
}

json run_reference(const suite_run_result& r) {
  return {{"path", r.file.string()},
          {"sha256", r.sha256},
          {"suite", r.config.value("suite", json())},
          {"suite_sha256", r.config.value("suite_sha256", json())},
          {"overrides", r.config.value("overrides", json())},
          {"created", r.created},
          {"status", r.summary.value("status", json())},
          {"workloads", r.records.size()}};
}

std::string plural(std::size_t n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

} // namespace

std::string_view compare_status_name(compare_status s) {
  return name_of(status_names, s, "UNKNOWN");
}

suite_run_result load_suite_run(const fs::path& folder_or_file, const std::string& label) {
  suite_run_result r;
  r.label = label;
  r.file = locate_result(folder_or_file, label);
  json doc;
  std::string bytes;
  try {
    doc = read_json_file_checked(r.file, {}, &bytes);
  } catch (const json_input_error& e) {
    throw compare_input_error(label + ": " + std::string(e.what()));
  }
  auto checked = suite_run_from_document(doc, r.file, label);
  checked.sha256 = sha256_hex(bytes);
  return checked;
}

suite_run_result suite_run_from_document(const json& doc, const fs::path& file,
                                         const std::string& label) {
  suite_run_result r;
  r.label = label;
  r.file = file;
  r.sha256 = sha256_hex(doc.dump());
  check_envelope(r, doc);
  r.environment = doc["environment"];
  r.config = doc["config"];
  r.summary = doc["summary"];
  r.created = doc.value("created", json());
  take_records(r, doc["records"]);
  return r;
}

std::vector<environment_difference> environment_differences(const suite_run_result& base,
                                                            const suite_run_result& next) {
  std::vector<environment_difference> diffs;
  for (const auto& f : checked_fields) {
    auto b = value_at(base, f), n = value_at(next, f);
    if (!same_value(b, n)) diffs.push_back({f.name, std::move(b), std::move(n)});
  }
  // The SM clock matters only where it was held: an unlocked clock moves with load anyway.
  const checked_field locked = checked_fields[4];
  if (value_at(base, locked) == true && value_at(next, locked) == true) {
    const checked_field mhz{"environment.clocks.sm_application_mhz", "/clocks/sm_application_mhz",
                            false};
    auto b = value_at(base, mhz), n = value_at(next, mhz);
    if (!same_value(b, n)) diffs.push_back({mhz.name, std::move(b), std::move(n)});
  }
  return diffs;
}

namespace {

// Both decisions' bootstrap: the workload's own resampling seed; the direction checked.
bootstrap_options ratio_bootstrap(const std::string& direction, const std::string& id,
                                  const compare_options& opt) {
  if (direction != "lower" && direction != "higher")
    throw std::invalid_argument("metric direction must be lower or higher");
  bootstrap_options b;
  b.resamples = opt.resamples;
  b.seed = opt.seed ^ stream_id(id);
  return b;
}

} // namespace

ratio_decision decide_ratio(std::span<const double> base, std::span<const double> next,
                            const std::string& direction, const std::string& id,
                            const compare_options& opt) {
  const auto b = ratio_bootstrap(direction, id, opt);
  // Oriented like a time, so one decision rule serves both directions.
  const auto iv = direction == "lower" ? bootstrap_ratio_of_medians(next, base, b)
                                       : bootstrap_ratio_of_medians(base, next, b);
  return {iv.estimate, iv.lo, iv.hi, decide(iv.lo, iv.hi, opt.min_effect)};
}

ratio_decision decide_paired_ratio(std::span<const double> base, std::span<const double> next,
                                   const std::string& direction, const std::string& id,
                                   const compare_options& opt) {
  auto b = ratio_bootstrap(direction, id, opt);
  // Few pairs (three seeds): the percentile interval of the median of per-pair ratios spans
  // the pairs' own ratios, where BCa's jackknife has too few points to correct anything.
  b.method = ci_method::percentile;
  const auto iv = direction == "lower" ? bootstrap_paired_ratio(next, base, b)
                                       : bootstrap_paired_ratio(base, next, b);
  return {iv.estimate, iv.lo, iv.hi, decide(iv.lo, iv.hi, opt.min_effect), true};
}

std::size_t run_comparison::count(compare_status s) const {
  return static_cast<std::size_t>(std::count_if(workloads.begin(), workloads.end(),
                                                [s](const auto& w) { return w.status == s; }));
}

std::size_t run_comparison::paired() const {
  return workloads.size() - count(compare_status::missing);
}

std::size_t run_comparison::gate_change_count() const {
  std::size_t n = 0;
  for (const auto& w : workloads)
    n += w.gate_changes.size();
  return n;
}

std::size_t run_comparison::workloads_failing_gates_new() const {
  return static_cast<std::size_t>(
      std::count_if(workloads.begin(), workloads.end(),
                    [](const auto& w) { return !w.failing_gates_new.empty(); }));
}

bool run_comparison::fails() const {
  return count(compare_status::slower) > 0 || workloads_failing_gates_new() > 0;
}

run_comparison compare_runs(const suite_run_result& base, const suite_run_result& next,
                            const compare_options& opt) {
  check_options(opt);
  run_comparison c;
  c.options = opt;
  c.environment_differences = environment_differences(base, next);
  if (!c.environment_differences.empty() && !opt.allow_env_change)
    throw compare_input_error(refusal(c.environment_differences));
  const auto b = by_id(base), n = by_id(next);
  std::set<std::string> ids;
  for (const auto& [id, rec] : b)
    ids.insert(id);
  for (const auto& [id, rec] : n)
    ids.insert(id);
  for (const auto& id : ids) {
    const auto ib = b.find(id), in = n.find(id);
    if (ib != b.end() && in != n.end()) {
      c.workloads.push_back(compare_pair(*ib->second, *in->second, opt));
    } else if (ib != b.end()) {
      c.workloads.push_back(one_sided(*ib->second, true));
      c.only_in_base.push_back(id);
    } else {
      c.workloads.push_back(one_sided(*in->second, false));
      c.only_in_new.push_back(id);
    }
  }
  return c;
}

std::optional<double> workload_comparison::clock_shift() const {
  if (!base || !next || !base->sm_mhz || !next->sm_mhz) return std::nullopt;
  return *next->sm_mhz / *base->sm_mhz - 1.0;
}

std::size_t run_comparison::clock_shift_count() const {
  std::size_t n = 0;
  for (const auto& w : workloads)
    if (const auto s = w.clock_shift(); s && std::abs(*s) > clock_shift_threshold) ++n;
  return n;
}

std::string compare_summary_line(const run_comparison& c) {
  std::ostringstream s;
  s << "compare: " << c.paired() << " paired: ";
  bool first = true;
  for (const auto st :
       {compare_status::slower, compare_status::faster, compare_status::same,
        compare_status::ambiguous, compare_status::no_data, compare_status::incomparable}) {
    const auto n = c.count(st);
    // The four decisions always show; the two refusals only when they happen.
    if (n == 0 && (st == compare_status::no_data || st == compare_status::incomparable)) continue;
    s << (first ? "" : ", ") << n << " " << compare_status_name(st);
    first = false;
  }
  const auto missing = c.only_in_base.size() + c.only_in_new.size();
  s << "; " << missing << " missing";
  if (missing)
    s << " (" << c.only_in_base.size() << " only in BASE, " << c.only_in_new.size()
      << " only in NEW)";
  s << "; " << plural(c.gate_change_count(), "gate change");
  if (const auto f = c.workloads_failing_gates_new())
    s << "; " << plural(f, "workload") << " failing gates in NEW";
  if (!c.environment_differences.empty())
    s << "; environment differs (" << c.environment_differences.size() << " fields, allowed)";
  if (const auto n = c.clock_shift_count())
    s << "; " << plural(n, "workload") << " with the SM clock moved";
  s << " -> " << (c.fails() ? "FAIL" : "PASS");
  return s.str();
}

json environment_difference_json(const environment_difference& d) {
  return {{"field", d.field}, {"base", d.base}, {"new", d.next}};
}

json compare_record(const workload_comparison& w) {
  json changes = json::array();
  for (const auto& g : w.gate_changes)
    changes.push_back(
        {{"name", g.name}, {"base", pass_word(g.base_pass)}, {"new", pass_word(g.new_pass)}});
  json j = {{"type", "compare_workload"},
            {"id", "compare/" + w.id},
            {"workload", w.id},
            {"metric", w.metric},
            {"decision", compare_status_name(w.status)},
            {"base", side_json(w.base)},
            {"new", side_json(w.next)},
            {"ratio", w.ratio ? json(w.ratio->ratio) : json(nullptr)},
            {"ratio_ci95", w.ratio ? json::array({w.ratio->lo, w.ratio->hi}) : json(nullptr)},
            {"paired_by_sample_key", w.ratio && w.ratio->paired},
            {"gate_changes", std::move(changes)},
            {"failing_gates_new", w.failing_gates_new}};
  if (!w.why.empty()) j["why"] = w.why;
  if (w.status == compare_status::missing) j["missing_from"] = w.missing_from;
  return j;
}

json compare_config(const suite_run_result& base, const suite_run_result& next,
                    const compare_options& opt) {
  return {
      {"base", run_reference(base)},
      {"new", run_reference(next)},
      {"min_effect", opt.min_effect},
      {"allow_env_change", opt.allow_env_change},
      {"ratio", "time-like: NEW/BASE when the metric's direction is lower, BASE/NEW when higher; "
                "above 1 is worse"},
      {"bootstrap",
       {{"statistic", "ratio of medians, each run resampled on its own"},
        {"method", "bca"},
        {"paired", "when both records name the same sample_keys: the median of the per-key ratios, "
                   "pairs resampled, percentile interval"},
        {"confidence", 0.95},
        {"resamples", opt.resamples},
        {"seed", opt.seed},
        {"seed_per_workload", "seed xor stream_id(workload id)"}}},
      {"decision_rule", "FASTER: the interval lies below 1 - min_effect; SLOWER: above 1 + "
                        "min_effect; SAME: inside [1 - min_effect, 1 + min_effect]; else "
                        "AMBIGUOUS"},
      {"environment_fields",
       {"environment.gpu.name", "environment.driver.nvml_driver_version",
        "environment.driver.cuda_driver_version", "config.clock_policy",
        "environment.clocks.locked", "environment.clocks.sm_application_mhz (when locked)"}}};
}

json compare_summary(const run_comparison& c) {
  json counts = json::object();
  for (const auto st : {compare_status::faster, compare_status::slower, compare_status::same,
                        compare_status::ambiguous, compare_status::no_data,
                        compare_status::incomparable, compare_status::missing})
    counts[std::string(compare_status_name(st))] = c.count(st);
  json diffs = json::array();
  for (const auto& d : c.environment_differences)
    diffs.push_back(environment_difference_json(d));
  return {{"status", "complete"},
          {"verdict", c.fails() ? "FAIL" : "PASS"},
          {"paired", c.paired()},
          {"counts", std::move(counts)},
          {"only_in_base", c.only_in_base},
          {"only_in_new", c.only_in_new},
          {"gate_changes", c.gate_change_count()},
          {"workloads_failing_gates_new", c.workloads_failing_gates_new()},
          {"clock_shifts", c.clock_shift_count()},
          {"environment_differences", std::move(diffs)},
          {"line", compare_summary_line(c)}};
}

} // namespace kg
