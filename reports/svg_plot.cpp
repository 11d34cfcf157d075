#include "reports/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace kg::svg {

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    switch (ch) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    case '\'':
      out += "&#39;";
      break;
    default:
      out += ch;
    }
  }
  return out;
}

std::string num(double v) {
  if (!std::isfinite(v)) return "0";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  std::string s = buf;
  while (!s.empty() && s.back() == '0')
    s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

double scale::operator()(double v) const {
  double a = d0, b = d1;
  if (log) {
    // A value <= 0 has no place on a log axis: pin it to the low end rather than emit NaN.
    v = std::log10(std::max(v, 1e-300));
    a = std::log10(a);
    b = std::log10(b);
  }
  if (b == a) return (r0 + r1) / 2;
  return r0 + (v - a) / (b - a) * (r1 - r0);
}

std::vector<double> ticks(double lo, double hi, int target) {
  std::vector<double> out;
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi)) return {lo};
  const double raw = (hi - lo) / std::max(target, 1);
  int e = static_cast<int>(std::floor(std::log10(raw)));
  double m = 10;
  for (const double c : {1.0, 2.0, 5.0, 10.0})
    if (raw <= c * std::pow(10.0, e)) {
      m = c;
      break;
    }
  if (m == 10) m = 1, ++e;
  // Tick k is k * m * 10^e, computed as one correctly rounded product or quotient of integers so
  // that labels read 0.6, not 0.6000000000000001.
  const double p10 = std::pow(10.0, std::abs(e));
  auto at = [&](long long k) { return e < 0 ? k * m / p10 : k * m * p10; };
  const double step = at(1);
  for (long long k = static_cast<long long>(std::ceil(lo / step - 1e-9)); at(k) <= hi + step * 1e-9;
       ++k)
    out.push_back(at(k));
  return out;
}

std::vector<double> log_ticks(double lo, double hi) {
  std::vector<double> out;
  if (!(lo > 0) || !(hi > lo)) return {lo};
  const int e0 = static_cast<int>(std::floor(std::log10(lo))),
            e1 = static_cast<int>(std::ceil(std::log10(hi)));
  const bool dense = e1 - e0 <= 2;
  for (int e = e0; e <= e1; ++e)
    for (const double m : dense ? std::vector<double>{1, 2, 5} : std::vector<double>{1}) {
      const double t = m * std::pow(10.0, e);
      if (t >= lo * (1 - 1e-9) && t <= hi * (1 + 1e-9)) out.push_back(t);
    }
  return out;
}

std::string tick_label(double v) {
  char buf[32];
  const double a = std::fabs(v);
  if (a != 0 && (a < 1e-3 || a >= 1e6))
    std::snprintf(buf, sizeof buf, "%.3g", v);
  else
    std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

canvas::canvas(double width, double height, std::string_view title)
    : width_(width), height_(height), title_(title) {}

namespace {
std::string tooltip_element(std::string_view tooltip) {
  return tooltip.empty() ? "" : "<title>" + html_escape(tooltip) + "</title>";
}
} // namespace

void canvas::line(double x1, double y1, double x2, double y2, std::string_view cls) {
  body_ += "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" +
           num(y2) + "\" class=\"" + html_escape(cls) + "\"/>";
}

void canvas::rect(double x, double y, double w, double h, std::string_view cls,
                  std::string_view tooltip, std::string_view fill) {
  const std::string head = "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" +
                           num(std::max(w, 0.0)) + "\" height=\"" + num(std::max(h, 0.0)) +
                           "\" class=\"" + html_escape(cls) + "\"" +
                           (fill.empty() ? std::string() : " fill=\"" + html_escape(fill) + "\"");
  body_ += tooltip.empty() ? head + "/>" : head + ">" + tooltip_element(tooltip) + "</rect>";
}

void canvas::circle(double cx, double cy, double r, std::string_view cls,
                    std::string_view tooltip) {
  const std::string head = "<circle cx=\"" + num(cx) + "\" cy=\"" + num(cy) + "\" r=\"" + num(r) +
                           "\" class=\"" + html_escape(cls) + "\"";
  body_ += tooltip.empty() ? head + "/>" : head + ">" + tooltip_element(tooltip) + "</circle>";
}

void canvas::polyline(const std::vector<std::pair<double, double>>& points, std::string_view cls) {
  std::string pts;
  for (const auto& [x, y] : points)
    pts += (pts.empty() ? "" : " ") + num(x) + "," + num(y);
  body_ += "<polyline points=\"" + pts + "\" class=\"" + html_escape(cls) + "\"/>";
}

void canvas::text(double x, double y, std::string_view s, std::string_view cls,
                  std::string_view anchor) {
  body_ += "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" class=\"" + html_escape(cls) +
           "\" text-anchor=\"" + html_escape(anchor) + "\">" + html_escape(s) + "</text>";
}

void canvas::vertical_text(double x, double y, std::string_view s, std::string_view cls) {
  body_ += "<text transform=\"translate(" + num(x) + "," + num(y) + ") rotate(-90)\" class=\"" +
           html_escape(cls) + "\" text-anchor=\"middle\">" + html_escape(s) + "</text>";
}

std::string canvas::str() const {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width_) + "\" height=\"" +
         num(height_) + "\" viewBox=\"0 0 " + num(width_) + " " + num(height_) +
         "\" role=\"img\" aria-label=\"" + html_escape(title_) + "\"><title>" +
         html_escape(title_) + "</title>" + body_ + "</svg>";
}

void frame::fit(const canvas& c) {
  x.r0 = left;
  x.r1 = c.width() - right;
  y.r0 = c.height() - bottom;
  y.r1 = top;
}

void frame::draw_axes(canvas& c, const std::vector<double>& xticks,
                      const std::vector<double>& yticks, std::string_view xtitle,
                      std::string_view ytitle, std::string_view title) const {
  for (const double t : yticks) {
    const double py = y(t);
    c.line(x.r0, py, x.r1, py, "grid");
    c.text(x.r0 - 6, py + 4, tick_label(t), "tick", "end");
  }
  for (const double t : xticks) {
    const double px = x(t);
    c.line(px, y.r0, px, y.r0 + 5, "axis");
    c.text(px, y.r0 + 18, tick_label(t), "tick", "middle");
  }
  c.line(x.r0, y.r0, x.r1, y.r0, "axis");
  c.line(x.r0, y.r0, x.r0, y.r1, "axis");
  c.text((x.r0 + x.r1) / 2, c.height() - 6, xtitle, "axis-title", "middle");
  c.vertical_text(14, (y.r0 + y.r1) / 2, ytitle, "axis-title");
  c.text(8, 16, title, "plot-title"); // from the left edge: a long id needs the whole width
}

} // namespace kg::svg
