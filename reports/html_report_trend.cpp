// Trend lines from the run history (reports/run_history.h): each workload of a suite run, its
// primary metric over the history's runs of the same suite, with intervals and the decision
// against the run before (stored in the history, not recomputed here).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>

#include "reports/html_report_parts.h"
#include "reports/svg_plot.h"

namespace kg::html {
namespace {

// Seconds drawn in the unit their values read best in; other units as they are.
std::pair<double, std::string> display_unit(double largest, const std::string& unit) {
  if (unit != "s") return {1, unit};
  if (largest >= 1) return {1, "s"};
  if (largest >= 1e-3) return {1e3, "ms"};
  if (largest >= 1e-6) return {1e6, "us"};
  return {1e9, "ns"};
}

std::string trend_plot(const json& w, const std::vector<json>& points) {
  const auto unit = w.value("metric", json::object()).value("unit", std::string());
  double hi = 0, lo = INFINITY;
  for (const auto& p : points) {
    const json& ci = p.value("ci95", json());
    const double e = p["estimate"].get<double>();
    hi = std::max({hi, e, ci.is_array() && ci.size() == 2 ? ci[1].get<double>() : e});
    lo = std::min({lo, e, ci.is_array() && ci.size() == 2 ? ci[0].get<double>() : e});
  }
  const auto [factor, shown] = display_unit(hi, unit);
  const double pad = (hi - lo) * 0.1 + std::fabs(hi) * 1e-3;
  const double y0 = std::max(0.0, lo - pad) * factor, y1 = (hi + pad) * factor;
  const auto id = w.value("id", std::string());
  svg::canvas c(370, 190,
                id + ": " + w.value("metric", json::object()).value("name", std::string()) +
                    " over the history's runs");
  svg::frame f;
  f.left = 56;
  f.top = 28;
  f.bottom = 38;
  const double n = static_cast<double>(points.size());
  f.x = {-0.5, n - 0.5, 0, 0};
  f.y = {y0, y1, 0, 0};
  f.fit(c);
  // x ticks: the run ids, thinned to about six labels.
  std::vector<double> xt;
  const std::size_t every = std::max<std::size_t>(1, points.size() / 6);
  for (std::size_t i = 0; i < points.size(); i += every)
    xt.push_back(static_cast<double>(i));
  // The y title must fit the plot's 124 pixels: the metric's name only when it is short.
  const auto metric = w.value("metric", json::object()).value("name", std::string());
  const auto ytitle = metric.size() + shown.size() <= 20 ? metric + " (" + shown + ")" : shown;
  f.draw_axes(c, {}, svg::ticks(y0, y1, 4), "run (history id)", ytitle,
              id.size() + metric.size() <= 46 ? id + ": " + metric : id);
  for (const double t : xt) {
    const auto i = static_cast<std::size_t>(t);
    c.line(f.x(t), f.y.r0, f.x(t), f.y.r0 + 4, "axis");
    c.text(f.x(t), f.y.r0 + 15, points[i].value("run_id", json()).dump(), "tick", "middle");
  }
  std::vector<std::pair<double, double>> line;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const json& p = points[i];
    const double x = f.x(static_cast<double>(i)), e = p["estimate"].get<double>() * factor;
    const json& ci = p.value("ci95", json());
    if (ci.is_array() && ci.size() == 2)
      c.line(x, f.y(ci[0].get<double>() * factor), x, f.y(ci[1].get<double>() * factor), "ci");
    line.emplace_back(x, f.y(e));
  }
  c.polyline(line, "series");
  for (std::size_t i = 0; i < points.size(); ++i) {
    const json& p = points[i];
    const auto d = p.value("decision", json()).is_string() ? p["decision"].get<std::string>() : "";
    const double e = p["estimate"].get<double>();
    c.circle(line[i].first, line[i].second, 3, "pt " + d,
             "run " + p.value("run_id", json()).dump() + " (" + p.value("created", std::string()) +
                 ", " + p.value("revision", std::string()).substr(0, 10) + "): " + sig(e * factor) +
                 " " + shown + (d.empty() ? "" : ", " + d + " against the run before"));
  }
  return c.str();
}

} // namespace

std::string trend_section(const json& doc, const json& history) {
  const auto suite = doc.value("config", json::object()).value("suite", std::string());
  std::vector<std::string> ids;
  for (const auto& r : doc.value("records", json::array()))
    if (r.value("type", std::string()) == "suite_workload") ids.push_back(r.value("id", ""));
  struct trend {
    bool slower_last;
    std::string plot;
  };
  std::vector<trend> trends;
  std::set<std::int64_t> runs;
  for (const auto& w : history.value("workloads", json::array())) {
    if (std::find(ids.begin(), ids.end(), w.value("id", std::string())) == ids.end()) continue;
    std::vector<json> points;
    for (const auto& p : w.value("points", json::array()))
      if (p.value("kind", std::string()) == "suite_run" &&
          p.value("series", std::string()) == suite && p.value("estimate", json()).is_number())
        points.push_back(p);
    if (points.empty()) continue;
    for (const auto& p : points)
      runs.insert(p.value("run_id", std::int64_t{0}));
    trends.push_back({points.back().value("decision", json()) == "SLOWER", trend_plot(w, points)});
  }
  std::stable_sort(trends.begin(), trends.end(),
                   [](const trend& a, const trend& b) { return a.slower_last > b.slower_last; });
  std::string plots;
  for (const auto& t : trends)
    plots += t.plot;
  const std::string body =
      trends.empty()
          ? "<p>The history holds no run of suite " + esc(suite) + " with these workloads.</p>"
          : "<p class=\"muted\">" + std::to_string(runs.size()) +
                (runs.size() == 1 ? " run" : " runs") + " of suite " + esc(suite) +
                " in the history; each workload's median and 95% interval per run of suite " +
                esc(suite) +
                ", the dot coloured by the decision against the run before (red: SLOWER); "
                "workloads whose last run was SLOWER first.</p><div class=\"plots\">" +
                plots + "</div>";
  return section("Trends from the history", body, "trends");
}

} // namespace kg::html
