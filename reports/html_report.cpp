#include "reports/html_report.h"

#include <cmath>
#include <cstdio>
#include <system_error>

#include "reports/html_report_parts.h"
#include "reports/json_input.h"
#include "reports/result_writer.h"
#include "reports/run_compare.h"
#include "reports/run_history.h"
#include "reports/svg_plot.h"

namespace kg {
namespace html {

std::string esc(std::string_view s) {
  return svg::html_escape(s);
}

std::string sig(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

std::string text(const json& v) {
  if (v.is_string()) return esc(v.get<std::string>());
  if (v.is_null()) return "-";
  if (v.is_number_float()) return sig(v.get<double>());
  return esc(v.dump());
}

std::string with_unit(double v, const std::string& unit) {
  if (unit != "s") return sig(v) + " " + esc(unit);
  const double a = std::fabs(v);
  if (a >= 1 || a == 0) return sig(v) + " s";
  if (a >= 1e-3) return sig(v * 1e3) + " ms";
  if (a >= 1e-6) return sig(v * 1e6) + " us";
  return sig(v * 1e9) + " ns";
}

std::string badge(std::string_view word, std::string_view cls) {
  return "<span class=\"badge " + esc(cls) + "\">" + esc(word) + "</span>";
}

std::string section(std::string_view title, const std::string& body, std::string_view id) {
  return "<section" + (id.empty() ? std::string() : " id=\"" + esc(id) + "\"") + "><h3>" +
         esc(title) + "</h3>" + body + "</section>";
}

std::string table(const std::vector<std::string>& head,
                  const std::vector<std::vector<std::string>>& rows, std::string_view cls) {
  std::string out =
      "<table" + (cls.empty() ? std::string() : " class=\"" + esc(cls) + "\"") + "><thead><tr>";
  for (const auto& h : head)
    out += "<th>" + esc(h) + "</th>";
  out += "</tr></thead><tbody>";
  for (const auto& r : rows) {
    out += "<tr>";
    for (const auto& c : r)
      out += "<td>" + c + "</td>";
    out += "</tr>";
  }
  return out + "</tbody></table>";
}

std::string decision_label(const std::string& d) {
  const std::string cls = d == "SLOWER"      ? "fail"
                          : d == "FASTER"    ? "pass"
                          : d == "AMBIGUOUS" ? "warn"
                          : d == "SAME"      ? "same"
                                             : "none";
  return badge(d, cls);
}

namespace {

const json& at(const json& obj, const char* key) {
  static const json null_value;
  return obj.is_object() && obj.contains(key) ? obj[key] : null_value;
}

std::string dl_row(std::string_view name, const std::string& value_html) {
  return "<dt>" + esc(name) + "</dt><dd>" + value_html + "</dd>";
}

} // namespace

std::string environment_block(const json& env) {
  const json& gpu = at(env, "gpu");
  const json& clocks = at(env, "clocks");
  const json& driver = at(env, "driver");
  const json& build = at(env, "build");
  const json& git = at(env, "git");
  // A machine without a GPU writes "unavailable" in every field: say it once.
  std::string gpu_text = text(at(gpu, "name"));
  if (gpu.is_object() && at(gpu, "sm_count").is_number())
    gpu_text += ", " + text(gpu["sm_count"]) + " SMs, CC " + text(at(gpu, "compute_capability"));
  std::string clock_text = "unavailable";
  if (clocks.is_object() && at(clocks, "sm_application_mhz").is_number()) {
    const json& locked = at(clocks, "locked");
    clock_text = "SM application " + text(at(clocks, "sm_application_mhz")) + " MHz (max " +
                 text(at(clocks, "sm_max_mhz")) + "), memory " +
                 text(at(clocks, "mem_application_mhz")) + " MHz; " +
                 (locked.is_boolean()
                      ? (locked.get<bool>() ? badge("locked", "pass") : badge("not locked", "warn"))
                      : text(locked));
    if (clocks.contains("locked_basis"))
      clock_text += " <span class=\"muted\">" + text(clocks["locked_basis"]) + "</span>";
  }
  const std::string driver_text = "NVML " + text(at(driver, "nvml_driver_version")) + ", CUDA " +
                                  text(at(driver, "cuda_driver_version")) + " (runtime " +
                                  text(at(env, "cuda_runtime_version")) + ")";
  const std::string build_text =
      text(at(build, "build_type")) + ", " + text(at(build, "compiler")) + ", CUDA " +
      text(at(build, "cuda_compiler_version")) + " " + text(at(build, "cuda_arch")) +
      ", LibTorch " + text(at(build, "libtorch"));
  const json& dirty = at(git, "dirty");
  const std::string git_text =
      "<code>" + text(at(git, "revision")) + "</code>" +
      (dirty.is_boolean() && dirty.get<bool>() ? " " + badge("dirty", "warn") : "");
  const std::string host =
      text(at(at(env, "os"), "pretty_name")) + ", " + text(at(at(env, "cpu"), "model"));
  return "<dl class=\"env\">" + dl_row("GPU", gpu_text) + dl_row("SM clocks", clock_text) +
         dl_row("driver", driver_text) + dl_row("build", build_text) +
         dl_row("git revision", git_text) + dl_row("host", host) + "</dl>";
}

} // namespace html

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* page_css = R"css(
:root{--fg:#1b1f24;--muted:#5b6570;--line:#d0d7de;--bg:#fff;--pass:#1a7f37;--fail:#cf222e;
--warn:#9a6700;--same:#57606a;--accent:#0969da}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);
background:var(--bg);margin:0 auto;max-width:1200px;padding:16px 24px}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:19px;margin:28px 0 6px;border-bottom:2px solid var(--line)}
h3{font-size:16px;margin:20px 0 6px}
.muted{color:var(--muted);font-size:12px}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;overflow-wrap:anywhere}
td:first-child code{white-space:nowrap}
.badge{display:inline-block;padding:0 6px;border-radius:4px;font-weight:600;font-size:12px;
border:1px solid currentColor;white-space:nowrap}
.badge.pass{color:var(--pass)}.badge.fail{color:var(--fail)}.badge.warn{color:var(--warn)}
.badge.same{color:var(--same)}.badge.none{color:var(--muted)}
.verdict{font-size:20px;padding:2px 10px}
.summary{border:1px solid var(--line);border-radius:6px;padding:8px 14px;margin:8px 0;background:#f6f8fa}
.summary p{margin:4px 0}
dl.env{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:6px 0}
dl.env dt{font-weight:600}dl.env dd{margin:0}
table{border-collapse:collapse;width:100%;font-size:12.5px;margin:6px 0}
th,td{border-bottom:1px solid var(--line);padding:3px 6px;text-align:left;vertical-align:top}
td:last-child{overflow-wrap:anywhere}
th{background:#f6f8fa;position:sticky;top:0}
td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
.nw{white-space:nowrap}
tr.bad td{background:#fff1f0}
.bar{display:inline-block;width:90px;height:10px;background:#eaeef2;border-radius:2px;vertical-align:middle}
.bar span{display:block;height:100%;background:var(--accent);border-radius:2px}
.bar span.over{background:var(--warn)}
svg{max-width:100%;height:auto;font-family:system-ui,sans-serif}
svg .grid{stroke:#eaeef2}svg .axis{stroke:#57606a}svg .tick{font-size:10px;fill:#57606a}
svg .axis-title{font-size:11px;fill:#1b1f24}svg .plot-title{font-size:12px;font-weight:600;fill:#1b1f24}
.plots svg .plot-title{font-size:11px}
svg .label{font-size:10px;fill:#1b1f24}svg .one{stroke:#1b1f24;stroke-width:1}
svg .band{fill:#0969da;fill-opacity:.12}svg .limit{stroke:#cf222e;stroke-dasharray:4 3}
svg .ci{stroke:#57606a;stroke-width:1.5}svg .ci.SLOWER{stroke:#cf222e}svg .ci.FASTER{stroke:#1a7f37}
svg .ci.AMBIGUOUS{stroke:#9a6700}
svg .pt{fill:#0969da}svg .pt.SLOWER{fill:#cf222e}svg .pt.FASTER{fill:#1a7f37}svg .pt.AMBIGUOUS{fill:#9a6700}
svg .series{fill:none;stroke:#0969da;stroke-width:1.5}svg .series2{fill:none;stroke:#8250df;stroke-width:1.5}
svg .pt2{fill:#8250df}svg .mark{fill:#cf222e}
svg .box{fill:#0969da;fill-opacity:.35}svg .whisker{stroke:#0969da;stroke-opacity:.6}
svg .cell-label{font-size:10px;text-anchor:middle}
.plots{display:flex;flex-wrap:wrap;gap:8px}
article{margin-bottom:40px}
@media print{*{-webkit-print-color-adjust:exact;print-color-adjust:exact}
body{max-width:none;padding:0;font-size:11px}th{position:static}
.summary{background:none}section,svg,tr{break-inside:avoid}article{break-before:page}
article:first-of-type{break-before:auto}a{color:inherit;text-decoration:none}}
)css";

const char* kind_title(const std::string& kind) {
  if (kind == "suite_run") return "suite run";
  if (kind == "compare") return "comparison";
  if (kind == "eval") return "evaluation";
  if (kind == "fastp") return "fast_p";
  if (kind == "audit_checker") return "checker audit";
  return "audit";
}

fs::path result_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec) ? p / "result.json" : p;
}

json read_json(const fs::path& file) {
  try {
    return read_json_file_checked(file);
  } catch (const json_input_error& e) {
    throw report_error(e.what());
  }
}

json read_lines(const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return json::array();
  try {
    return read_records(file);
  } catch (const output_error& e) {
    throw report_error(e.what());
  }
}

// `audit checker` writes no result envelope: its folder's files (or its summary.json) make the
// page. nullopt when `p` is not such a folder.
std::optional<json> load_checker_folder(const fs::path& p) {
  std::error_code ec;
  const bool dir = fs::is_directory(p, ec);
  if (dir && fs::exists(p / "result.json", ec)) return std::nullopt;
  if (!dir && p.filename() != "summary.json") return std::nullopt;
  const fs::path folder = dir ? p : p.parent_path();
  if (!fs::exists(folder / "summary.json", ec) || !fs::exists(folder / "kill_matrix.json", ec))
    return std::nullopt;
  json summary = read_json(folder / "summary.json");
  if (!summary.is_object() || summary.value("schema", json()) != "kernelgate.audit.checker/1")
    return std::nullopt;
  return json{{"kind", "audit_checker"},
              {"folder", folder.string()},
              {"summary", std::move(summary)},
              {"kill_matrix", read_json(folder / "kill_matrix.json")},
              {"verdicts", read_lines(folder / "verdicts.jsonl")},
              {"witnesses", read_lines(folder / "witnesses.jsonl")}};
}

json load(const fs::path& p) {
  if (auto folder = load_checker_folder(p)) return *folder;
  const fs::path file = result_file(p);
  json doc;
  try {
    doc = read_json_file_checked(file);
  } catch (const json_input_error& e) {
    throw report_error(e.what());
  }
  if (!doc.is_object() || !doc.contains("kind") || !doc["kind"].is_string())
    throw report_error(file.string() + ": not a kernelgate result (no \"kind\")");
  const auto kind = doc["kind"].get<std::string>();
  for (const char* k : {"suite_run", "compare", "eval", "fastp", "audit"})
    if (kind == k) return doc;
  throw report_error(file.string() + ": kind '" + printable(kind) +
                     "' has no report (suite_run, compare, eval, fastp, audit)");
}

// The suite run's comparison with the baseline, as the compare result would store it.
json compare_with(const fs::path& baseline, const fs::path& run) {
  try {
    const auto base = load_suite_run(baseline, "BASE");
    const auto next = load_suite_run(run, "NEW");
    compare_options opt;
    opt.allow_env_change = true; // a report shows the differences instead of refusing
    const auto c = compare_runs(base, next, opt);
    json records = json::array();
    for (const auto& w : c.workloads)
      records.push_back(compare_record(w));
    return {{"records", records},
            {"summary", compare_summary(c)},
            {"min_effect", opt.min_effect},
            {"base", baseline.string()}};
  } catch (const compare_input_error& e) {
    throw report_error(e.what());
  }
}

html::page_part part_of(const json& doc, const std::optional<json>& comparison) {
  const auto kind = doc["kind"].get<std::string>();
  if (kind == "suite_run") return html::suite_part(doc, comparison);
  if (kind == "compare") return html::compare_part(doc);
  if (kind == "eval") return html::eval_part(doc);
  if (kind == "fastp") return html::fastp_part(doc);
  if (kind == "audit_checker") return html::audit_checker_part(doc);
  return html::audit_part(doc);
}

// What the page calls a result: its result.json, or a checker audit's folder.
std::string shown(const fs::path& path, const json& doc) {
  return doc.contains("folder") ? doc["folder"].get<std::string>() : result_file(path).string();
}

std::string article(const fs::path& path, const json& doc, const std::optional<json>& comparison,
                    const std::optional<json>& history, int index) {
  const auto kind = doc["kind"].get<std::string>();
  html::page_part part;
  try {
    part = part_of(doc, comparison);
    if (history && kind == "suite_run") part.body += html::trend_section(doc, *history);
  } catch (const json::exception& e) {
    // A well-formed file whose fields have other types than the schema's.
    throw report_error(shown(path, doc) + ": unexpected shape (" + e.what() + ")");
  }
  const std::string id = "r" + std::to_string(index);
  return "<article id=\"" + id + "\"><h2>" + html::esc(kind_title(kind)) + ": <code>" +
         html::esc(shown(path, doc)) + "</code></h2><p class=\"muted\">" +
         (doc.contains("created")
              ? "created " + html::text(doc["created"]) + ", finished " +
                    html::text(doc.value("finished", json())) + "; <code>" +
                    html::esc(doc.value("argv", json::array()).dump()) + "</code>"
              : "from the folder's summary.json, kill_matrix.json, verdicts.jsonl") +
         "</p><div class=\"summary\"><p>" +
         html::badge(part.verdict, std::string("verdict ") + part.verdict_class) + "</p>" +
         part.summary + "</div>" +
         // A compare result's environment is the comparing machine's, not the runs'.
         html::section(kind == "compare" ? "Environment of the machine that compared"
                                         : "Environment",
                       doc.contains("environment")
                           ? html::environment_block(doc["environment"])
                           : "<p class=\"muted\">This result records no environment.</p>") +
         part.body + "</article>";
}

} // namespace

// The whole history, as `kernelgate history --json` prints it.
static json history_of(const fs::path& file) {
  try {
    return history_report_json(run_history::open_existing(file).query({}));
  } catch (const history_error& e) {
    throw report_error(e.what());
  }
}

std::string html_report(const std::vector<fs::path>& results,
                        const std::optional<fs::path>& baseline,
                        const std::optional<fs::path>& history_file) {
  if (results.empty()) throw report_error("no result given");
  std::vector<json> docs;
  for (const auto& p : results)
    docs.push_back(load(p));
  if (baseline && load(*baseline)["kind"] != "suite_run")
    throw report_error(result_file(*baseline).string() + ": --baseline must be a suite run");
  std::optional<json> history;
  if (history_file) history = history_of(*history_file);
  std::string articles, toc;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    std::optional<json> comparison;
    if (baseline && docs[i]["kind"] == "suite_run")
      comparison = compare_with(*baseline, results[i]);
    articles += article(results[i], docs[i], comparison, history, static_cast<int>(i));
    toc += "<li><a href=\"#r" + std::to_string(i) + "\">" +
           html::esc(kind_title(docs[i]["kind"].get<std::string>())) + ": " +
           html::esc(shown(results[i], docs[i])) + "</a></li>";
  }
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
         "<title>kernelgate report</title><style>" +
         std::string(page_css) + "</style></head><body><h1>kernelgate report</h1>" +
         (docs.size() > 1 ? "<ol>" + toc + "</ol>" : "") + articles + "</body></html>\n";
}

} // namespace kg
