// A tiny SVG writer for the HTML report (reports/html_report.h): scales, "nice" ticks, axes with
// tick labels, and the few shapes the plots need. Every text it writes goes through html_escape,
// since ids and reasons come from result files and may hold '<' or '&'.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kg::svg {

// &, <, >, " and ' as entities: safe in element text and in double-quoted attributes.
std::string html_escape(std::string_view s);

// A number as SVG coordinates want it: at most two decimals, no exponent, no trailing zeros.
std::string num(double v);

// Maps [d0, d1] onto pixels [r0, r1] (r1 < r0 for a y axis, whose pixels grow downwards);
// logarithmic when `log` (both ends > 0). Values outside the domain map outside the range.
struct scale {
  double d0 = 0, d1 = 1, r0 = 0, r1 = 1;
  bool log = false;
  double operator()(double v) const;
};

// About `target` round tick values (1, 2 or 5 times a power of ten apart) within [lo, hi]; for a
// log scale, the powers of ten within it plus 2x and 5x when there are few of them.
std::vector<double> ticks(double lo, double hi, int target = 5);
std::vector<double> log_ticks(double lo, double hi);

// A tick label: short, no exponent for everyday magnitudes ("0.5", "1200", "2e-05").
std::string tick_label(double v);

class canvas {
public:
  // `title` becomes the <title> (read aloud, shown on hover) and the aria-label.
  canvas(double width, double height, std::string_view title);

  void line(double x1, double y1, double x2, double y2, std::string_view cls);
  // `fill`: a colour for this one rect (a heat map's cell), else the class decides.
  void rect(double x, double y, double w, double h, std::string_view cls,
            std::string_view tooltip = {}, std::string_view fill = {});
  void circle(double cx, double cy, double r, std::string_view cls, std::string_view tooltip = {});
  void polyline(const std::vector<std::pair<double, double>>& points, std::string_view cls);
  // anchor: "start", "middle" or "end".
  void text(double x, double y, std::string_view s, std::string_view cls,
            std::string_view anchor = "start");
  // Text turned 90 degrees counter-clockwise about (x, y): a y axis label.
  void vertical_text(double x, double y, std::string_view s, std::string_view cls);

  std::string str() const; // the whole <svg> element
  double width() const { return width_; }
  double height() const { return height_; }

private:
  double width_, height_;
  std::string title_, body_;
};

// A plot area inside a canvas: margins for the tick labels and axis titles, the two scales over
// it, and the axes drawn with their ticks, grid lines, labels and titles (units in the titles).
struct frame {
  double left = 64, right = 16, top = 28, bottom = 44;
  scale x, y;
  // Sets the scales' pixel ranges from the canvas size and margins.
  void fit(const canvas& c);
  void draw_axes(canvas& c, const std::vector<double>& xticks, const std::vector<double>& yticks,
                 std::string_view xtitle, std::string_view ytitle, std::string_view title) const;
};

} // namespace kg::svg
