// An evaluation (one row per task and candidate, a speedup plot) and a fast_p result (the curve
// over p with its intervals, intended and aligned denominators, every exclusion and missing task).
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "reports/html_report_parts.h"
#include "reports/svg_plot.h"

namespace kg::html {
namespace {

std::string interval(const json& v) {
  if (!v.is_array() || v.size() != 2 || !v[0].is_number()) return "-";
  // A bound that is zero up to roundoff (a Wilson bound at 0 of n) reads as 0, not 5.55e-17.
  auto bound = [](double x) { return sig(std::fabs(x) < 1e-12 ? 0.0 : x, 3); };
  return "[" + bound(v[0].get<double>()) + ", " + bound(v[1].get<double>()) + "]";
}

std::string status_label(const std::string& s) {
  return badge(s, s == "PASSED"                                ? "pass"
                  : s == "MISSING" || s == "INVALID_REFERENCE" ? "none"
                                                               : "fail");
}

// Speedup per timed task with its interval, on a log axis around 1.
std::string speedup_plot(const std::vector<json>& timed) {
  double lo = 0.9, hi = 1.1;
  for (const auto& r : timed) {
    const auto& ci = r.contains("speedup_ci95") ? r["speedup_ci95"] : json::array();
    lo = std::min({lo, r["speedup"].get<double>(), ci.size() == 2 ? ci[0].get<double>() : 1.0});
    hi = std::max({hi, r["speedup"].get<double>(), ci.size() == 2 ? ci[1].get<double>() : 1.0});
  }
  lo /= 1.1;
  hi *= 1.1;
  const double row_h = 16;
  svg::canvas c(900, 60 + row_h * static_cast<double>(timed.size()) + 30,
                "Speedup over the baseline per task, with its 95% interval");
  svg::frame f;
  f.left = 300;
  f.top = 36;
  f.x = {lo, hi, 0, 0, true};
  f.fit(c);
  f.y = {0, static_cast<double>(timed.size()), f.top, c.height() - f.bottom};
  auto xt = svg::log_ticks(lo, hi);
  if (xt.size() < 3) xt = svg::ticks(lo, hi, 6);
  for (const double t : xt) {
    c.line(f.x(t), f.top, f.x(t), f.y.r1, "grid");
    c.text(f.x(t), f.y.r1 + 18, svg::tick_label(t), "tick", "middle");
  }
  c.line(f.left, f.y.r1, c.width() - f.right, f.y.r1, "axis");
  c.line(f.x(1), f.top - 4, f.x(1), f.y.r1, "one");
  c.text(8, 16, "Speedup (baseline time / candidate time) per passing task, 95% interval",
         "plot-title");
  c.text((f.left + c.width() - f.right) / 2, c.height() - 6,
         "speedup (x, log scale; above 1 is faster than the baseline)", "axis-title", "middle");
  for (std::size_t i = 0; i < timed.size(); ++i) {
    const json& r = timed[i];
    const double y = f.y(static_cast<double>(i) + 0.5);
    const double s = r["speedup"].get<double>();
    const auto label = r.value("task", std::string()) + " / " + r.value("candidate", std::string());
    c.text(f.left - 8, y + 3.5, label, "label", "end");
    if (r.contains("speedup_ci95") && r["speedup_ci95"].size() == 2)
      c.line(f.x(r["speedup_ci95"][0].get<double>()), y, f.x(r["speedup_ci95"][1].get<double>()), y,
             "ci");
    c.circle(f.x(s), y, 3.2, s > 1 ? "pt FASTER" : "pt", label + ": " + sig(s, 4) + "x");
  }
  return c.str();
}

// fast_p over p: intended (n = intended tasks) and aligned (n = tasks with a baseline), each with
// its bootstrap interval as a whisker.
std::string fastp_curve(const std::string& candidate, const std::vector<json>& points) {
  double pmax = 0;
  for (const auto& pt : points)
    pmax = std::max(pmax, pt.value("p", 0.0));
  pmax = pmax > 0 ? pmax * 1.08 : 1;
  svg::canvas c(640, 320, "fast_p over p for " + candidate);
  svg::frame f;
  f.bottom = 48;
  f.x = {-pmax * 0.03, pmax, 0, 0}; // the points at p = 0 clear of the y axis
  f.y = {0, 1, 0, 0};
  f.fit(c);
  f.draw_axes(c, svg::ticks(0, pmax, 6), svg::ticks(0, 1, 5), "p (speedup threshold, x)",
              "fast_p (fraction of tasks)", "fast_p of " + candidate);
  for (const auto& [key, ci_key, series, pt_cls, dx] :
       {std::tuple{"fast_p_intended", "ci95_intended", "series", "pt", -3.0},
        std::tuple{"fast_p_aligned", "ci95_aligned", "series2", "pt2", 3.0}}) {
    std::vector<std::pair<double, double>> line;
    for (const auto& pt : points) {
      const json& r = pt["result"];
      if (!r.contains(key) || !r[key].is_number()) continue;
      const double x = f.x(pt.value("p", 0.0)) + dx, v = r[key].get<double>();
      line.emplace_back(x, f.y(v));
      if (r.contains(ci_key) && r[ci_key].is_array() && r[ci_key].size() == 2)
        c.line(x, f.y(r[ci_key][0].get<double>()), x, f.y(r[ci_key][1].get<double>()),
               std::string("ci ") + series);
      c.circle(x, f.y(v), 3, pt_cls,
               std::string(key) + " at p=" + sig(pt.value("p", 0.0), 3) + ": " + sig(v, 3) + " " +
                   interval(r.value(ci_key, json())));
    }
    c.polyline(line, series);
  }
  const double lx = f.x.r1 - 190;
  c.line(lx, f.top + 8, lx + 18, f.top + 8, "series");
  c.text(lx + 22, f.top + 12, "intended (all tasks meant)", "label");
  c.line(lx, f.top + 24, lx + 18, f.top + 24, "series2");
  c.text(lx + 22, f.top + 28, "aligned (tasks with a baseline)", "label");
  return c.str();
}

} // namespace

page_part eval_part(const json& doc) {
  std::vector<json> records;
  for (const auto& r : doc.value("records", json::array()))
    if (r.value("type", std::string()) == "evaluation") records.push_back(r);
  std::map<std::string, int> counts;
  std::set<std::string> seen;
  for (const auto& r : records) {
    ++counts[r.value("status", std::string("?"))];
    seen.insert(r.value("task", std::string()));
  }
  const json intended = doc.value("config", json::object()).value("intended_tasks", json::array());
  std::vector<std::string> unevaluated;
  for (const auto& t : intended)
    if (t.is_string() && !seen.count(t.get<std::string>())) unevaluated.push_back(t);
  page_part p;
  const int passed = counts.count("PASSED") ? counts["PASSED"] : 0;
  p.verdict = std::to_string(passed) + " of " + std::to_string(intended.size()) + " tasks passed";
  p.verdict_class = passed == static_cast<int>(intended.size()) ? "pass" : "warn";
  p.summary = "<p>";
  for (const auto& [s, n] : counts)
    p.summary += status_label(s) + " " + std::to_string(n) + " &nbsp; ";
  p.summary += "</p><p>" + std::to_string(intended.size()) + " intended tasks, " +
               std::to_string(records.size()) + " evaluation records, " +
               std::to_string(unevaluated.size()) + " intended tasks with no record</p>";
  std::vector<json> timed;
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : records) {
    if (r.contains("speedup") && r["speedup"].is_number()) timed.push_back(r);
    rows.push_back(
        {"<code>" + text(r.value("task", json())) + "</code>", text(r.value("candidate", json())),
         status_label(r.value("status", std::string("?"))),
         r.contains("speedup") ? "<span class=\"nw\">" + sig(r["speedup"].get<double>()) +
                                     "x</span><br><span class=\"muted nw\">" +
                                     interval(r.value("speedup_ci95", json())) + "</span>"
                               : "-",
         r.contains("baseline_us") ? sig(r["baseline_us"].get<double>()) + " us" : "-",
         r.contains("candidate_us") ? sig(r["candidate_us"].get<double>()) + " us" : "-",
         text(r.value("status_reason", json()))});
  }
  for (const auto& t : unevaluated)
    rows.push_back({"<code>" + esc(t) + "</code>", "-", status_label("MISSING"), "-", "-", "-",
                    "no evaluation record"});
  if (!timed.empty()) p.body += section("Speedups", speedup_plot(timed), "speedups");
  p.body += section(
      "Tasks",
      table({"task", "candidate", "status", "speedup [95%]", "baseline", "candidate", "reason"},
            rows),
      "tasks");
  return p;
}

namespace {

std::string candidate_name(const json& c) {
  return c.value("candidate", json()).is_string() ? c["candidate"].get<std::string>()
                                                  : std::string("(KernelBench run)");
}

// The fast_p records of one candidate, by p.
std::vector<json> points_of(const json& doc, const std::string& name) {
  std::vector<json> points;
  for (const auto& r : doc.value("records", json::array()))
    if (r.value("type", std::string()) == "fast_p" &&
        (r.value("candidate", json()).is_string() ? r["candidate"].get<std::string>()
                                                  : std::string("(KernelBench run)")) == name)
      points.push_back(r);
  std::sort(points.begin(), points.end(),
            [](const json& a, const json& b) { return a.value("p", 0.0) < b.value("p", 0.0); });
  return points;
}

const json* at_p(const std::vector<json>& points, double p) {
  for (const auto& pt : points)
    if (pt.value("p", 0.0) == p) return &pt;
  return nullptr;
}

// fast_1 (faster than the baseline), the number people quote, intended and aligned.
std::string fast_1_text(const std::vector<json>& points) {
  const json* pt = at_p(points, 1.0);
  if (!pt) return "-";
  const json& r = (*pt)["result"];
  return sig(r.value("fast_p_intended", 0.0), 3) + " intended, " +
         (r.value("fast_p_aligned", json()).is_number() ? sig(r["fast_p_aligned"].get<double>(), 3)
                                                        : std::string("-")) +
         " aligned";
}

// One row per candidate: the counts behind both denominators and fast_1 with its interval.
std::string candidates_table(const json& doc, const json& candidates) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& c : candidates) {
    const json t = c.value("tasks", json::object());
    const auto name = candidate_name(c);
    const auto points = points_of(doc, name);
    const json* one = at_p(points, 1.0);
    std::string f1 = "-";
    if (one)
      f1 = text((*one)["result"].value("fast_p_intended", json())) + " " +
           interval((*one)["result"].value("ci95_intended", json())) + " / " +
           text((*one)["result"].value("fast_p_aligned", json())) + " " +
           interval((*one)["result"].value("ci95_aligned", json()));
    rows.push_back({"<code>" + esc(name) + "</code>", text(t.value("intended", json())),
                    text(t.value("aligned", json())), text(t.value("correct", json())),
                    text(t.value("incorrect", json())), text(t.value("missing", json())),
                    text(t.value("excluded", json())), f1,
                    text(c.value("geomean_speedup", json::object()).value("value", json()))});
  }
  return table({"candidate", "intended", "aligned", "correct", "incorrect", "missing", "excluded",
                "fast_1 intended / aligned [bootstrap 95%]", "geomean speedup"},
               rows);
}

// A candidate's fast_p curve, its table over p, and every exclusion and missing task.
std::string candidate_section(const json& doc, const json& c) {
  const auto name = candidate_name(c);
  const auto points = points_of(doc, name);
  std::vector<std::vector<std::string>> rows;
  for (const auto& pt : points) {
    const json& r = pt["result"];
    const json na = r.value("noise_aware", json::object());
    rows.push_back({sig(pt.value("p", 0.0), 3), text(r.value("fast", json())),
                    text(r.value("fast_p_intended", json())) + " " +
                        interval(r.value("ci95_intended", json())),
                    text(r.value("fast_p_aligned", json())) + " " +
                        interval(r.value("ci95_aligned", json())),
                    interval(r.value("wilson95_intended", json())) + " / " +
                        interval(r.value("wilson95_aligned", json())),
                    na.value("available", false) ? text(na.value("fast", json())) : "-",
                    std::to_string(r.value("near_ties", json::array()).size())});
  }
  std::vector<std::vector<std::string>> excluded;
  for (const auto& e : c.value("exclusions", json::array()))
    excluded.push_back({"<code>" + text(e.value("task", json())) + "</code>",
                        badge("excluded from aligned", "warn"), text(e.value("reason", json()))});
  for (const auto& m : c.value("missing", json::array()))
    excluded.push_back({"<code>" + text(m.value("task", json())) + "</code>",
                        badge("missing (not fast)", "none"), text(m.value("note", json()))});
  return section(
      "fast_p of " + name,
      fastp_curve(name, points) +
          table({"p", "fast", "fast_p intended [bootstrap 95%]", "fast_p aligned [bootstrap 95%]",
                 "Wilson 95% intended / aligned", "noise-aware fast", "near-ties"},
                rows) +
          "<h3>Exclusions and missing tasks</h3>" +
          (excluded.empty() ? "<p>None.</p>" : table({"task", "kind", "reason"}, excluded)),
      "fastp");
}

} // namespace

page_part fastp_part(const json& doc) {
  const json summary = doc.value("summary", json::object());
  const json candidates = summary.value("candidates", json::array());
  page_part p;
  p.verdict = "fast_p";
  p.verdict_class = "none";
  // One candidate: its fast_1 is the headline. Several (an eval of a red team, of many models):
  // the best fast_1 over them, and a table first; curves only for candidates with a correct
  // task, since every other curve is zero at every p (the table says so).
  std::size_t without_correct = 0;
  double best = -1;
  for (const auto& c : candidates) {
    const auto name = candidate_name(c);
    const auto points = points_of(doc, name);
    const json* one = at_p(points, 1.0);
    const double f1 = one ? (*one)["result"].value("fast_p_intended", 0.0) : -1;
    if (candidates.size() == 1 && one) p.verdict = "fast_1 " + name + ": " + fast_1_text(points);
    if (candidates.size() > 1 && one && f1 > best) {
      best = f1;
      p.verdict = "fast_1, best of " + std::to_string(candidates.size()) + " candidates: " + name +
                  ": " + fast_1_text(points);
    }
    const bool any_correct = c.value("tasks", json::object()).value("correct", 0) > 0;
    if (candidates.size() == 1 || any_correct)
      p.body += candidate_section(doc, c);
    else
      ++without_correct;
  }
  p.summary = candidates_table(doc, candidates) +
              "<p class=\"muted\">intended: every task meant (fast_p's denominator); aligned: "
              "tasks with a baseline (KernelBench's denominator). Missing tasks count as not "
              "fast, not as measured failures.</p>";
  if (without_correct > 0)
    p.body += "<p class=\"muted\">" + std::to_string(without_correct) +
              (without_correct == 1 ? " candidate has" : " candidates have") +
              " no correct task: fast_p is 0 at every p, so no curve is drawn; its row above "
              "holds its counts.</p>";
  return p;
}

} // namespace kg::html
