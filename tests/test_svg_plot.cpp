// The report's SVG helpers (reports/svg_plot.h): escaping and where a value lands on an axis,
// against expectations worked out by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "reports/svg_plot.h"

namespace kg::svg {
namespace {

TEST(svg_plot, html_escape_replaces_the_five_markup_characters) {
  EXPECT_EQ(html_escape("a<b&c\"d'e>f"), "a&lt;b&amp;c&quot;d&#39;e&gt;f");
  EXPECT_EQ(html_escape("kernel.gemv.down.b1"), "kernel.gemv.down.b1");
  // Already escaped text is escaped again: the page shows what the file holds.
  EXPECT_EQ(html_escape("&amp;"), "&amp;amp;");
}

TEST(svg_plot, linear_scale_maps_a_value_to_its_pixel) {
  // Domain [0, 50] ms onto pixels [64, 564]: 10 pixels per ms, so 12.5 ms sits at 64 + 125.
  const scale x{0, 50, 64, 564};
  EXPECT_DOUBLE_EQ(x(12.5), 189);
  EXPECT_DOUBLE_EQ(x(0), 64);
  EXPECT_DOUBLE_EQ(x(50), 564);
  // A y axis runs upwards: [0, 1] onto [276, 28]; 0.25 is a quarter of 248 pixels above 276.
  const scale y{0, 1, 276, 28};
  EXPECT_DOUBLE_EQ(y(0.25), 214);
}

TEST(svg_plot, log_scale_puts_equal_ratios_at_equal_distances) {
  // [0.5, 2] onto [0, 200]: 1 is halfway (log 0.5 and log 2 are symmetric about log 1), 0.5 and 2
  // at the ends; 1.0905 (= 2^0.125) one eighth of the way from 1 towards 2.
  const scale x{0.5, 2, 0, 200, true};
  EXPECT_NEAR(x(1), 100, 1e-9);
  EXPECT_NEAR(x(0.5), 0, 1e-9);
  EXPECT_NEAR(x(2), 200, 1e-9);
  EXPECT_NEAR(x(std::pow(2.0, 0.125)), 112.5, 1e-9);
}

TEST(svg_plot, ticks_are_round_steps_within_the_range) {
  EXPECT_EQ(ticks(0, 54, 5), (std::vector<double>{0, 20, 40})); // step 10.8 rounds up to 20
  EXPECT_EQ(ticks(0, 1, 5), (std::vector<double>{0, 0.2, 0.4, 0.6, 0.8, 1}));
  EXPECT_EQ(ticks(0.83, 1.37, 5), (std::vector<double>{1, 1.2})); // step 0.108 -> 0.2
  // Within two decades 1, 2 and 5 of each; wider, the powers of ten alone.
  EXPECT_EQ(log_ticks(0.8, 1.3), (std::vector<double>{1}));
  EXPECT_EQ(log_ticks(0.3, 3), (std::vector<double>{0.5, 1, 2}));
  EXPECT_EQ(log_ticks(0.3, 30), (std::vector<double>{1, 10}));
}

TEST(svg_plot, numbers_are_short_and_finite) {
  EXPECT_EQ(num(12.5), "12.5");
  EXPECT_EQ(num(3.0), "3");
  EXPECT_EQ(num(-0.001), "0");
  EXPECT_EQ(num(std::nan("")), "0");
  EXPECT_EQ(tick_label(0.5), "0.5");
  EXPECT_EQ(tick_label(2e-5), "2e-05");
}

TEST(svg_plot, canvas_escapes_every_text_it_writes) {
  canvas c(100, 50, "t<&\"");
  c.text(10, 20, "id<b>&x", "label");
  c.circle(5, 5, 2, "pt", "tip \"q\"");
  const auto s = c.str();
  EXPECT_NE(s.find("<title>t&lt;&amp;&quot;</title>"), std::string::npos);
  EXPECT_NE(s.find(">id&lt;b&gt;&amp;x</text>"), std::string::npos);
  EXPECT_NE(s.find("<title>tip &quot;q&quot;</title>"), std::string::npos);
  EXPECT_EQ(s.find("<b>"), std::string::npos);
  EXPECT_EQ(s.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"100\" height=\"50\"", 0),
            0u);
}

} // namespace
} // namespace kg::svg
