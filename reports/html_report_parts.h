// The pieces of reports/html_report.cpp's page, one file per result kind. Each returns HTML
// whose every string from the result went through svg::html_escape.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kg::html {

using nlohmann::json;

std::string esc(std::string_view s);
// A JSON value as text: a string's contents, a number compactly, null as "-"; escaped.
std::string text(const json& v);
// A value read at a glance: 4 significant digits; seconds scaled to ms, us or ns.
std::string sig(double v, int digits = 4);
std::string with_unit(double v, const std::string& unit);
std::string badge(std::string_view word, std::string_view cls); // PASS, FAIL, ...
std::string section(std::string_view title, const std::string& body, std::string_view id = {});
// A table: `head` cells are plain text (escaped here), `rows` cells already HTML.
std::string table(const std::vector<std::string>& head,
                  const std::vector<std::vector<std::string>>& rows, std::string_view cls = {});
// The decision word of a comparison, as a coloured label.
std::string decision_label(const std::string& d);

// The environment block: GPU, SM clocks and whether locked, driver, build, git revision.
std::string environment_block(const json& env);

// A comparison as the compare result stores it (records of type compare_workload, summary):
// counts, the forest plot of ratios with the min-effect band, and the table.
std::string compare_counts(const json& summary);
std::string forest_plot(const std::vector<json>& records, double min_effect);
std::string compare_table(const std::vector<json>& records);

// The history's trend of each workload of a suite run (history: run_history's query as
// history_report_json writes it).
std::string trend_section(const json& doc, const json& history);

// A kill matrix as a heat map: cells row -> column -> {accepted, rejected, errors, missing}; a
// cell's colour and label are the fraction rejected (killed) of those decided, with counts.
std::string heat_map(const std::string& title, const json& cells, const std::string& column_title);

// Per kind: the summary line items and the body.
struct page_part {
  std::string verdict, verdict_class; // "PASS"/"pass", "FAIL"/"fail", or a neutral word
  std::string summary;                // HTML: what a person needs first
  std::string body;                   // HTML: tables and plots
};
// `comparison`: {records, summary, min_effect} when a --baseline was given.
page_part suite_part(const json& doc, const std::optional<json>& comparison);
page_part compare_part(const json& doc);
page_part eval_part(const json& doc);
page_part fastp_part(const json& doc);
page_part audit_part(const json& doc);
// `kernelgate audit checker`'s folder: {summary (summary.json), kill_matrix (kill_matrix.json),
// verdicts (verdicts.jsonl lines), witnesses (witnesses.jsonl lines, --protocol only)}.
page_part audit_checker_part(const json& folder);

} // namespace kg::html
