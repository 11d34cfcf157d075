// A comparison's pieces: counts, the forest plot and the table. The decisions are read from the
// records (run_compare.h made them); nothing here decides.
#include <algorithm>
#include <cmath>

#include "reports/html_report_parts.h"
#include "reports/svg_plot.h"
#include "stats/decision.h"

namespace kg::html {
namespace {

// Worst first: what a person must look at comes first.
int severity(const std::string& decision) {
  if (decision == "SLOWER") return 0;
  if (decision == "AMBIGUOUS") return 1;
  if (decision == "NO_DATA" || decision == "INCOMPARABLE" || decision == "MISSING") return 2;
  if (decision == "FASTER") return 3;
  return 4;
}

std::string decision_of(const json& r) {
  return r.value("decision", std::string("NO_DATA"));
}

std::vector<json> by_severity(std::vector<json> records) {
  std::stable_sort(records.begin(), records.end(), [](const json& a, const json& b) {
    return severity(decision_of(a)) < severity(decision_of(b));
  });
  return records;
}

std::string workload_of(const json& r) {
  return r.contains("workload") ? r["workload"].get<std::string>() : r.value("id", std::string());
}

std::string side_median(const json& side, const json& metric) {
  if (!side.is_object() || !side.contains("median") || !side["median"].is_number()) return "-";
  return with_unit(side["median"].get<double>(), metric.value("unit", std::string()));
}

} // namespace

std::string compare_counts(const json& s) {
  std::string counts;
  for (const char* d :
       {"SLOWER", "FASTER", "SAME", "AMBIGUOUS", "NO_DATA", "INCOMPARABLE", "MISSING"}) {
    const auto n = s.contains("counts") ? s["counts"].value(d, 0) : 0;
    if (n > 0 || std::string(d) == "SLOWER" || std::string(d) == "FASTER" ||
        std::string(d) == "SAME" || std::string(d) == "AMBIGUOUS")
      counts += decision_label(d) + " " + std::to_string(n) + " &nbsp; ";
  }
  std::string out = "<p>" + counts + "</p>";
  out += "<p>" + text(s.value("paired", json())) + " workloads paired; " +
         text(s.value("gate_changes", json())) + " gate changes; " +
         text(s.value("workloads_failing_gates_new", json())) + " workloads failing a gate";
  if (s.contains("clock_shifts") && s["clock_shifts"].is_array() && !s["clock_shifts"].empty())
    out += "; " + std::to_string(s["clock_shifts"].size()) + " SM clock shifts over 2%";
  out += "</p>";
  if (s.contains("environment_differences") && s["environment_differences"].is_array() &&
      !s["environment_differences"].empty()) {
    out += "<p>" + badge("environments differ", "warn");
    for (const auto& d : s["environment_differences"])
      out += " <code>" + text(d.value("field", json())) +
             "</code>: " + esc(d.value("base", json()).dump()) + " &rarr; " +
             esc(d.value("new", json()).dump()) + ";";
    out += "</p>";
  }
  if (s.contains("line")) out += "<p class=\"muted\">" + text(s["line"]) + "</p>";
  return out;
}

std::string forest_plot(const std::vector<json>& records, double min_effect) {
  std::vector<json> rows;
  for (const auto& r : by_severity(records))
    if (r.contains("ratio") && r["ratio"].is_number() && r.contains("ratio_ci95") &&
        r["ratio_ci95"].is_array() && r["ratio_ci95"].size() == 2)
      rows.push_back(r);
  if (rows.empty()) return "<p class=\"muted\">No workload has a ratio to plot.</p>";
  double lo = 1 - min_effect, hi = 1 + min_effect;
  for (const auto& r : rows) {
    lo = std::min({lo, r["ratio_ci95"][0].get<double>(), r["ratio"].get<double>()});
    hi = std::max({hi, r["ratio_ci95"][1].get<double>(), r["ratio"].get<double>()});
  }
  lo = std::max(lo / 1.05, 1e-6); // room for the whiskers' ends; log axis needs > 0
  hi *= 1.05;
  const double row_h = 14, label_w = 330;
  svg::canvas c(1000, 60 + row_h * static_cast<double>(rows.size()) + 40,
                "Ratio per workload with its 95% interval (above 1 is worse)");
  svg::frame f;
  f.left = label_w;
  f.top = 40;
  f.x = {lo, hi, 0, 0, true};
  f.y = {0, static_cast<double>(rows.size()), 0, 0};
  f.fit(c);
  f.y.r0 = f.top; // rows run downwards from the top
  f.y.r1 = c.height() - f.bottom;
  auto xt = svg::log_ticks(lo, hi);
  if (xt.size() < 3) xt = svg::ticks(lo, hi, 6);
  c.rect(f.x(1 - min_effect), f.top, f.x(1 + min_effect) - f.x(1 - min_effect), f.y.r1 - f.top,
         "band", "the +/-" + sig(min_effect * 100, 3) + "% minimum effect: inside it is SAME");
  for (const double t : xt) {
    c.line(f.x(t), f.top, f.x(t), f.y.r1, "grid");
    c.line(f.x(t), f.y.r1, f.x(t), f.y.r1 + 5, "axis");
    c.text(f.x(t), f.y.r1 + 18, svg::tick_label(t), "tick", "middle");
    // Tick labels above the rows too: a long plot's top is far from its axis.
    if (rows.size() > 20 && std::fabs(f.x(t) - f.x(1)) > 30)
      c.text(f.x(t), f.top - 10, svg::tick_label(t), "tick", "middle");
  }
  c.line(f.x(1), f.top - 6, f.x(1), f.y.r1, "one");
  c.line(label_w, f.y.r1, c.width() - f.right, f.y.r1, "axis");
  c.text((label_w + c.width() - f.right) / 2, c.height() - 6,
         "ratio, time-like: NEW/BASE (BASE/NEW for higher-is-better metrics), log scale",
         "axis-title", "middle");
  c.text(8, 16,
         "Forest plot: ratio and 95% interval per workload; shaded: within +/-" +
             sig(min_effect * 100, 3) + "% (SAME)",
         "plot-title");
  c.text(f.x(1), f.top - 10, "1 (no change)", "tick", "middle");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    const double y = f.y(static_cast<double>(i) + 0.5);
    const auto d = decision_of(r);
    const double ratio = r["ratio"].get<double>(), rlo = r["ratio_ci95"][0].get<double>(),
                 rhi = r["ratio_ci95"][1].get<double>();
    c.text(label_w - 8, y + 3.5, workload_of(r), "label", "end");
    c.line(f.x(rlo), y, f.x(rhi), y, "ci " + d);
    c.circle(f.x(ratio), y, 3.2, "pt " + d,
             workload_of(r) + ": " + sig(ratio) + " [" + sig(rlo) + ", " + sig(rhi) + "] " + d);
  }
  return c.str();
}

std::string compare_table(const std::vector<json>& records) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : by_severity(records)) {
    const json metric = r.value("metric", json::object());
    std::string ratio = "-";
    if (r.contains("ratio") && r["ratio"].is_number() && r["ratio_ci95"].is_array())
      ratio = "<span class=\"nw\">" + sig(r["ratio"].get<double>()) +
              "</span><br><span class=\"muted nw\">[" + sig(r["ratio_ci95"][0].get<double>()) +
              ", " + sig(r["ratio_ci95"][1].get<double>()) + "]" +
              (r.value("paired_by_sample_key", false) ? " paired" : "") + "</span>";
    std::string gates;
    for (const auto& g : r.value("gate_changes", json::array()))
      gates += text(g.value("name", json())) + " " + text(g.value("base", json())) + "&rarr;" +
               text(g.value("new", json())) + " ";
    for (const auto& g : r.value("failing_gates_new", json::array()))
      gates += badge("fails: " + g.get<std::string>(), "fail") + " ";
    const std::string why = r.contains("why") ? text(r["why"]) : "";
    rows.push_back({"<code>" + esc(workload_of(r)) + "</code>", text(metric.value("name", json())),
                    side_median(r.value("base", json()), metric),
                    side_median(r.value("new", json()), metric), ratio,
                    decision_label(decision_of(r)) + (why.empty() ? "" : " " + why), gates});
  }
  return table(
      {"workload", "metric", "base median", "new median", "ratio [95%]", "decision", "gates"},
      rows);
}

page_part compare_part(const json& doc) {
  const json summary = doc.value("summary", json::object());
  std::vector<json> records;
  for (const auto& r : doc.value("records", json::array()))
    if (r.value("type", std::string()) == "compare_workload") records.push_back(r);
  // Every compare result records its min_effect; an older one had compare's default.
  const double min_effect =
      doc.value("config", json::object()).value("min_effect", default_min_effect);
  page_part p;
  const auto verdict = summary.value("verdict", std::string("?"));
  p.verdict = verdict;
  p.verdict_class = verdict == "PASS" ? "pass" : verdict == "FAIL" ? "fail" : "none";
  const json cfg = doc.value("config", json::object());
  p.summary = compare_counts(summary) + "<p>BASE <code>" +
              text(cfg.value("base", json::object()).value("path", json())) +
              "</code>, NEW <code>" + text(cfg.value("new", json::object()).value("path", json())) +
              "</code></p>";
  p.body = section("Forest plot", forest_plot(records, min_effect), "forest") +
           section("Workloads (worst first)", compare_table(records));
  return p;
}

} // namespace kg::html
