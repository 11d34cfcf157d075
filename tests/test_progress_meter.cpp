// The progress meter every long command shares: plain lines off a terminal, a redrawn bar on
// one, and an ETA from the command's own cost estimates refined by measured time.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "suite/progress_meter.h"

using kg::progress_meter;

TEST(progress_meter, off_a_terminal_prints_only_the_finished_items_lines) {
  std::ostringstream out;
  {
    progress_meter m(out, false, 3);
    m.start("a");
    m.done("a: ok");
    m.note("warning: b is slow");
    m.start("b");
    m.done("b: ok");
  }
  EXPECT_EQ(out.str(), "a: ok\nwarning: b is slow\nb: ok\n"); // no control codes, no bar
}

TEST(progress_meter, on_a_terminal_keeps_each_line_above_a_redrawn_bar) {
  std::ostringstream out;
  progress_meter m(out, true, 4);
  m.start("first item");
  EXPECT_EQ(
      m.bar_text().rfind("[........................] 0/4  0:00 elapsed, ETA ?  first item", 0), 0u)
      << m.bar_text();
  m.done("first: ok");
  // 1 of 4 done: a quarter of the 24 cells.
  EXPECT_EQ(m.bar_text().rfind("[######..................] 1/4  ", 0), 0u) << m.bar_text();
  m.finish();
  const std::string s = out.str();
  EXPECT_NE(s.find("\r\033[Kfirst: ok\n"), std::string::npos);
  EXPECT_NE(s.find("first item"), std::string::npos);
  // The bar is erased at the end: the last thing written clears the line.
  ASSERT_GE(s.size(), 4u);
  EXPECT_EQ(s.substr(s.size() - 4), "\r\033[K");
  m.finish(); // idempotent
}

TEST(progress_meter, eta_in_seconds_scales_the_estimate_by_measured_time) {
  std::ostringstream out;
  progress_meter m(out, false, 3, 10.0); // estimates 2 + 3 + 5 s
  EXPECT_DOUBLE_EQ(m.eta_seconds(), 10.0);
  m.done("x", 2.0, 3.0);                   // took 1.5x its estimate
  EXPECT_DOUBLE_EQ(m.eta_seconds(), 12.0); // 8 s left x 1.5
  m.done("y", 3.0, 1.5);                   // 4.5 s spent for 5 s estimated: x 0.9
  EXPECT_DOUBLE_EQ(m.eta_seconds(), 4.5);  // the last 5 s left
}

TEST(progress_meter, eta_of_counted_items_is_unknown_until_one_finishes) {
  std::ostringstream out;
  progress_meter m(out, false, 5);
  EXPECT_LT(m.eta_seconds(), 0);
  m.done("a");
  EXPECT_GE(m.eta_seconds(), 0); // 4 left x elapsed per item
  for (int i = 0; i < 4; ++i)
    m.done("b");
  EXPECT_DOUBLE_EQ(m.eta_seconds(), 0.0);
  EXPECT_EQ(m.done_count(), 5u);
}

TEST(progress_meter, clock_text_shows_minutes_and_hours) {
  EXPECT_EQ(kg::clock_text(0), "0:00");
  EXPECT_EQ(kg::clock_text(65.4), "1:05");
  EXPECT_EQ(kg::clock_text(3725), "1:02:05");
  EXPECT_EQ(kg::clock_text(-3), "0:00");
}
