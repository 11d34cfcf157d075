// A suite run: its workload table (worst first), % of SOL bars, the serving workloads' p99
// inter-token latency, what sharing the GPU cost (fractions of solo), and with a baseline the
// comparison's forest plot.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "reports/colocation.h"
#include "reports/html_report_parts.h"
#include "reports/svg_plot.h"

namespace kg::html {
namespace {

bool gates_pass(const json& r) {
  for (const auto& g : r.value("gates", json::array()))
    if (!g.value("pass", false)) return false;
  return !r.contains("error");
}

std::string gates_cell(const json& r) {
  std::string ok, bad;
  int passed = 0;
  for (const auto& g : r.value("gates", json::array())) {
    const auto name = g.value("name", std::string("?"));
    if (g.value("pass", false)) {
      ++passed;
      ok += (ok.empty() ? "" : ", ") + name;
    } else {
      bad += badge("FAIL " + name, "fail") + " " + text(g.value("detail", json())) + " ";
    }
  }
  // The passing gates' names go into a tooltip: the cell stays one short line.
  return bad + (passed ? "<span class=\"nw\" title=\"" + esc(ok) + "\">" + std::to_string(passed) +
                             " pass</span>"
                       : "");
}

std::string median_cell(const json& r) {
  if (r.contains("error")) return badge("error", "fail") + " " + text(r["error"]);
  const auto unit = r.value("metric", json::object()).value("unit", std::string());
  if (!r.contains("estimate") || !r["estimate"].is_number()) return "-";
  // The interval on its own line, unwrapped: a narrow column must not break a number.
  std::string s = "<span class=\"nw\">" + with_unit(r["estimate"].get<double>(), unit) + "</span>";
  if (r.contains("ci95") && r["ci95"].is_array() && r["ci95"].size() == 2)
    s += "<br><span class=\"muted nw\">[" + with_unit(r["ci95"][0].get<double>(), unit) + ", " +
         with_unit(r["ci95"][1].get<double>(), unit) + "]</span>";
  return s;
}

std::string sol_cell(const json& r) {
  if (!r.contains("sol") || !r["sol"].is_object() || !r["sol"].contains("fraction") ||
      !r["sol"]["fraction"].is_number())
    return "<span class=\"muted\">-</span>";
  const double f = r["sol"]["fraction"].get<double>();
  const double w = std::clamp(f, 0.0, 1.0) * 100;
  return "<span class=\"nw\"><span class=\"bar\" title=\"bound " +
         esc(r["sol"].value("bound", json()).dump()) + "\"><span" +
         (f > 1 ? " class=\"over\"" : "") + " style=\"width:" + svg::num(w) +
         "%\"></span></span> " + sig(f * 100, 3) + "%</span>";
}

int severity(const json& r, const std::map<std::string, json>& cmp) {
  if (!gates_pass(r)) return 0;
  const auto it = cmp.find(r.value("id", std::string()));
  if (it == cmp.end()) return 5;
  const auto d = it->second.value("decision", std::string());
  return d == "SLOWER" ? 1 : d == "AMBIGUOUS" ? 2 : d == "FASTER" ? 3 : 4;
}

std::string workload_table(const std::vector<json>& records,
                           const std::map<std::string, json>& cmp) {
  std::vector<const json*> order;
  for (const auto& r : records)
    order.push_back(&r);
  std::stable_sort(order.begin(), order.end(), [&](const json* a, const json* b) {
    return severity(*a, cmp) < severity(*b, cmp);
  });
  std::vector<std::vector<std::string>> rows;
  for (const json* r : order) {
    const json metric = r->value("metric", json::object());
    // The level is the id's first word; the id column carries it.
    std::vector<std::string> row = {"<code>" + esc(r->value("id", std::string())) + "</code>",
                                    text(metric.value("name", json())) +
                                        " <span class=\"muted\">(" +
                                        text(metric.value("direction", json())) + ")</span>",
                                    median_cell(*r), sol_cell(*r), gates_cell(*r)};
    if (!cmp.empty()) {
      const auto it = cmp.find(r->value("id", std::string()));
      if (it == cmp.end()) {
        row.push_back("-");
      } else {
        // Decision and ratio in one cell: the table must fit a printed page.
        const json& c = it->second;
        row.push_back(decision_label(c.value("decision", std::string())) +
                      (c.contains("ratio") && c["ratio"].is_number()
                           ? " <span class=\"nw\">" + sig(c["ratio"].get<double>()) +
                                 "</span><br><span class=\"muted nw\">[" +
                                 sig(c["ratio_ci95"][0].get<double>()) + ", " +
                                 sig(c["ratio_ci95"][1].get<double>()) + "]</span>"
                           : ""));
      }
    }
    rows.push_back(std::move(row));
  }
  std::vector<std::string> head = {"workload", "metric", "median [95%]", "% of SOL", "gates"};
  if (!cmp.empty()) head.push_back("vs baseline: decision, ratio [95%]");
  return table(head, rows);
}

// The workload's p99 inter-token latency limit (params.itl_limit_ms); none drawn without one.
std::optional<double> limit_of(const json& r) {
  const json params = r.value("params", json::object());
  if (params.contains("itl_limit_ms") && params["itl_limit_ms"].is_number())
    return params["itl_limit_ms"].get<double>();
  return std::nullopt;
}

// A trace's inter-token latency distribution (extra.repeats[].itl_ms, runs since 2026-12-02).
struct itl_quantiles {
  double p50, p90, p99, max;
};
std::optional<itl_quantiles> itl_distribution(const json& trace) {
  const json d = trace.value("itl_ms", json());
  if (!d.is_object() || d.value("gaps", 0) < 1) return std::nullopt;
  for (const char* k : {"p50", "p90", "p99", "max"})
    if (!d.contains(k) || !d[k].is_number()) return std::nullopt;
  return itl_quantiles{d["p50"].get<double>(), d["p90"].get<double>(), d["p99"].get<double>(),
                       d["max"].get<double>()};
}

// serving_p99 workloads: each trace's p99 ITL (one dot per arrival seed) at the workload's
// offered load, one row per workload, against the limit; where the record holds each trace's
// distribution, a box from its p50 to p90 and a line on to its largest interval.
std::string p99_strip(const std::vector<const json*>& rows) {
  double hi = 0;
  std::set<double> limits;
  bool distributions = false;
  for (const json* r : rows) {
    if (const auto l = limit_of(*r)) {
      limits.insert(*l);
      hi = std::max(hi, *l);
    }
    for (const auto& t : (*r)["extra"]["repeats"]) {
      hi = std::max(hi, t.value("p99_itl_ms", 0.0));
      if (const auto d = itl_distribution(t)) {
        hi = std::max(hi, d->max);
        distributions = true;
      }
    }
  }
  hi *= 1.08;
  // With distributions each trace gets its own labelled sub-row: drawn 4 px apart they hid
  // one another (seen in the H200 smoke report of 2026-12-02).
  std::size_t most_traces = 1;
  for (const json* r : rows)
    most_traces = std::max<std::size_t>(most_traces, (*r)["extra"]["repeats"].size());
  const double trace_h = 13;
  const double row_h = distributions ? trace_h * static_cast<double>(most_traces) + 12 : 16;
  svg::canvas c(1000, 70 + row_h * static_cast<double>(rows.size()) + 30,
                "inter-token latency per trace (one dot per arrival seed)");
  svg::frame f;
  f.left = distributions ? 430 : 330; // the seeds' labels sit between the id and the axis
  f.top = 34;
  f.x = {0, hi, 0, 0};
  f.fit(c);
  f.y = {0, static_cast<double>(rows.size()), f.top, c.height() - f.bottom};
  const auto xt = svg::ticks(0, hi, 8);
  for (const double t : xt) {
    c.line(f.x(t), f.top, f.x(t), f.y.r1, "grid");
    c.line(f.x(t), f.y.r1, f.x(t), f.y.r1 + 5, "axis");
    c.text(f.x(t), f.y.r1 + 18, svg::tick_label(t), "tick", "middle");
  }
  c.line(f.left, f.y.r1, c.width() - f.right, f.y.r1, "axis");
  // One limit for all rows: a line through the plot; else each row gets its own mark below.
  if (limits.size() == 1) {
    const double limit = *limits.begin();
    c.line(f.x(limit), f.top - 4, f.x(limit), f.y.r1, "limit");
    c.text(f.x(limit), f.top - 8, "limit " + sig(limit) + " ms", "tick", "middle");
  }
  c.text(8, 16,
         distributions ? "Inter-token latency per trace at a fixed load: dot p99 (one per "
                         "arrival seed), box p50-p90, line to the largest; bar = median p99"
                       : "Serving at a fixed offered load: p99 inter-token latency of each "
                         "trace (dot = arrival seed, bar = median)",
         "plot-title");
  c.text((f.left + c.width() - f.right) / 2, c.height() - 6,
         distributions ? "inter-token latency (ms)" : "p99 inter-token latency (ms)", "axis-title",
         "middle");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const json& r = *rows[i];
    const double y = f.y(static_cast<double>(i) + 0.5);
    const auto id = r.value("id", std::string());
    const double rps = r["extra"].value("offered_rps", 0.0);
    c.text(f.left - (distributions ? 90 : 8), y + 3.5, id + " @ " + sig(rps, 3) + " req/s",
           "label", "end");
    if (r.contains("estimate") && r["estimate"].is_number())
      c.line(f.x(r["estimate"].get<double>()), y - 6, f.x(r["estimate"].get<double>()), y + 6,
             "one");
    const auto limit = limit_of(r);
    if (limit && limits.size() > 1) c.line(f.x(*limit), y - 7, f.x(*limit), y + 7, "limit");
    const auto& traces = r["extra"]["repeats"];
    for (std::size_t j = 0; j < traces.size(); ++j) {
      const auto& t = traces[j];
      const double v = t.value("p99_itl_ms", 0.0);
      // The traces of one workload one above the other, centred on its row.
      const double spacing = distributions ? trace_h : 4.0;
      const double ty = y + spacing * (static_cast<double>(j) - (traces.size() - 1) / 2.0);
      if (const auto d = itl_distribution(t)) {
        c.text(f.left - 6, ty + 3, "seed " + t.value("arrival_seed", json()).dump(), "tick", "end");
        c.line(f.x(d->p90), ty, f.x(d->max), ty, "whisker");
        c.rect(f.x(d->p50), ty - 3.5, std::max(1.5, f.x(d->p90) - f.x(d->p50)), 7, "box",
               id + " seed " + t.value("arrival_seed", json()).dump() + ": p50 " + sig(d->p50) +
                   " ms, p90 " + sig(d->p90) + " ms, p99 " + sig(d->p99) + " ms, largest " +
                   sig(d->max) + " ms");
      }
      c.circle(f.x(v), ty, 3.2, limit && v > *limit ? "pt SLOWER" : "pt",
               id + " seed " + t.value("arrival_seed", json()).dump() + ": p99 " + sig(v) +
                   " ms, mean batch " + sig(t.value("mean_batch", 0.0), 3));
    }
  }
  return c.str();
}

// serving_throughput workloads: the load search's p99 ITL against offered load (its own seed),
// and where each repeat's seed crossed the limit (the sample).
std::string throughput_plot(const json& r) {
  std::vector<std::pair<double, double>> pts;
  for (const auto& lp : r["extra"].value("load_points", json::array()))
    pts.emplace_back(lp.value("offered_rps", 0.0), lp.value("p99_itl_ms", 0.0));
  std::sort(pts.begin(), pts.end());
  const auto limit = limit_of(r);
  double xhi = 0, yhi = limit.value_or(0);
  for (const auto& [x, y] : pts) {
    xhi = std::max(xhi, x);
    yhi = std::max(yhi, y);
  }
  std::vector<std::pair<double, double>> crossings;
  for (const auto& rep : r["extra"].value("repeats", json::array()))
    if (rep.contains("at_limit") && rep["at_limit"].contains("offered_rps")) {
      crossings.emplace_back(rep["at_limit"]["offered_rps"].get<double>(),
                             rep["at_limit"].value("tokens_per_second", 0.0));
      xhi = std::max(xhi, crossings.back().first);
    }
  xhi *= 1.08;
  yhi *= 1.1;
  const auto id = r.value("id", std::string());
  svg::canvas c(370, 220, id + ": p99 inter-token latency vs offered load");
  svg::frame f;
  f.left = 44;
  f.top = 30;
  f.bottom = 40;
  f.x = {0, xhi, 0, 0};
  f.y = {0, yhi, 0, 0};
  f.fit(c);
  f.draw_axes(c, svg::ticks(0, xhi, 5), svg::ticks(0, yhi, 5), "offered load (requests/s)",
              "p99 ITL (ms)", id);
  if (limit) c.line(f.x.r0, f.y(*limit), f.x.r1, f.y(*limit), "limit");
  std::vector<std::pair<double, double>> px;
  for (const auto& [x, y] : pts)
    px.emplace_back(f.x(x), f.y(y));
  c.polyline(px, "series");
  for (const auto& [x, y] : pts)
    c.circle(f.x(x), f.y(y), 2.8, limit && y > *limit ? "pt SLOWER" : "pt",
             sig(x, 3) + " req/s: p99 " + sig(y, 3) + " ms");
  for (const auto& [x, tps] : crossings)
    if (limit)
      c.rect(f.x(x) - 3, f.y(*limit) - 3, 6, 6, "mark",
             "a repeat reached the limit at " + sig(x, 3) + " req/s: " + sig(tps, 4) + " tokens/s");
  return c.str();
}

std::string serving_section(const std::vector<json>& records) {
  std::vector<const json*> p99, throughput;
  for (const auto& r : records) {
    if (!r.contains("extra") || !r["extra"].is_object()) continue;
    const auto kind = r.value("kind", std::string());
    if (kind == "serving_p99" && r["extra"].contains("repeats")) p99.push_back(&r);
    if (kind == "serving_throughput" && r["extra"].contains("load_points"))
      throughput.push_back(&r);
  }
  std::string out;
  if (!p99.empty()) out += p99_strip(p99);
  if (!throughput.empty()) {
    out += "<p class=\"muted\">Throughput search: the line is the search seed's p99 ITL at each "
           "load tried, dashed red the limit, red squares where each repeat's seed reached the "
           "limit (its sample).</p><div class=\"plots\">";
    for (const json* r : throughput)
      out += throughput_plot(*r);
    out += "</div>";
  }
  return out.empty() ? "" : section("Serving: inter-token latency", out, "serving");
}

// Each workload beside others as a fraction of its solo twin (reports/colocation.h), computed
// from the records, so a run written before the summary carried it shows it too.
std::string colocation_section(const std::vector<json>& records) {
  const auto c = colocation_fractions(records);
  if (c.pairs.empty() && c.gaps.empty()) return "";
  std::vector<std::vector<std::string>> rows;
  for (const auto& p : c.pairs)
    rows.push_back({"<code>" + esc(p.id) + "</code>", esc(p.placement), esc(p.metric),
                    sig(p.fraction, 3),
                    p.interval ? "[" + sig(p.interval->lo, 3) + ", " + sig(p.interval->hi, 3) + "]"
                               : "one sample a side",
                    "<code>" + esc(p.solo_id) + "</code>"});
  for (const auto& g : c.gaps)
    rows.push_back({"<code>" + esc(g.id) + "</code>", "", "", "-", esc(g.reason), ""});
  return section(
      "Sharing the GPU: fractions of solo",
      "<p>Performance beside others over performance solo (below 1: slower), each "
      "workload against its solo twin of this run; 95% bootstrap interval.</p>" +
          table({"workload", "beside", "metric", "fraction", "95% interval", "solo twin"}, rows),
      "colocation");
}

} // namespace

page_part suite_part(const json& doc, const std::optional<json>& comparison) {
  std::vector<json> records;
  for (const auto& r : doc.value("records", json::array()))
    if (r.value("type", std::string()) == "suite_workload") records.push_back(r);
  std::map<std::string, json> cmp;
  if (comparison)
    for (const auto& c : (*comparison)["records"])
      cmp[c.value("workload", std::string())] = c;
  const json s = doc.value("summary", json::object());
  const bool gates_ok = s.value("gates_passed", false);
  const bool complete = s.value("status", std::string()) == "complete";
  const bool cmp_fail =
      comparison && (*comparison)["summary"].value("verdict", std::string()) == "FAIL";
  page_part p;
  p.verdict = gates_ok && complete && !cmp_fail ? "PASS" : "FAIL";
  p.verdict_class = p.verdict == "PASS" ? "pass" : "fail";
  int failing = 0;
  for (const auto& r : records)
    failing += gates_pass(r) ? 0 : 1;
  p.summary = "<p>suite <b>" + text(doc.value("config", json::object()).value("suite", json())) +
              "</b>: " + std::to_string(records.size()) + " workloads, status " +
              text(s.value("status", json())) + ", " +
              (failing ? badge(std::to_string(failing) +
                                   (failing == 1 ? " workload" : " workloads") + " failing gates",
                               "fail")
                       : badge("all gates pass", "pass")) +
              ", " + sig(s.value("wall_seconds", 0.0), 3) + " s</p>";
  if (comparison)
    p.summary += "<p>against baseline <code>" + text((*comparison)["base"]) + "</code>: " +
                 badge((*comparison)["summary"].value("verdict", std::string("?")),
                       cmp_fail ? "fail" : "pass") +
                 "</p>" + compare_counts((*comparison)["summary"]);
  if (comparison) {
    std::vector<json> crecs((*comparison)["records"].begin(), (*comparison)["records"].end());
    p.body += section("Comparison with the baseline",
                      forest_plot(crecs, (*comparison)["min_effect"].get<double>()), "forest");
  }
  p.body += section("Workloads (failing gates first" +
                        std::string(comparison ? ", then SLOWER, AMBIGUOUS" : "") + ")",
                    workload_table(records, cmp), "workloads");
  p.body += serving_section(records);
  p.body += colocation_section(records);
  return p;
}

} // namespace kg::html
