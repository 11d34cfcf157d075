// summarize_activity: the CUPTI span and the outside-the-window judgement, on hand-made records.
#include <gtest/gtest.h>

#include "timing/activity_tracer.h"

using namespace kg;

TEST(activity_span, span_runs_from_first_start_to_last_end_over_every_stream) {
  // Window opens at 1000 ns, closes at 9000 ns. Two kernels on stream 7, one memcpy on stream 9.
  const std::vector<gpu_activity> acts = {
      {2000, 3000, 7, 1}, {3500, 6000, 7, 1}, {2500, 7500, 9, 1}};
  const auto s = summarize_activity(acts, 1000, 9000);
  EXPECT_TRUE(s.any);
  EXPECT_DOUBLE_EQ(s.span_us, 5.5); // 2000 .. 7500 ns
  EXPECT_EQ(s.activities, 3);
  EXPECT_EQ(s.streams, 2);
  EXPECT_FALSE(s.outside_window);
}

TEST(activity_span, activity_before_the_window_opens_or_after_it_closes_is_outside) {
  const auto early = summarize_activity({{500, 900, 11, 1}, {1200, 1300, 7, 1}}, 1000, 9000);
  EXPECT_TRUE(early.outside_window);
  EXPECT_EQ(early.outside_stream, 11u);
  EXPECT_DOUBLE_EQ(early.span_us, 0.8); // 500 .. 1300 ns: the CUPTI backend times it all
  const auto late = summarize_activity({{1200, 1300, 7, 1}, {8000, 9001, 12, 1}}, 1000, 9000);
  EXPECT_TRUE(late.outside_window);
  EXPECT_EQ(late.outside_stream, 12u);
  // Touching the edges is inside: the work may start the moment the holding kernel ends.
  EXPECT_FALSE(summarize_activity({{1000, 9000, 7, 1}}, 1000, 9000).outside_window);
}

TEST(activity_span, an_unknown_window_side_is_not_judged_and_no_activity_is_no_span) {
  EXPECT_FALSE(summarize_activity({{10, 20, 7, 1}}, 0, 0).outside_window);
  EXPECT_TRUE(summarize_activity({{10, 20, 7, 1}}, 15, 0).outside_window);
  const auto none = summarize_activity({}, 1000, 9000);
  EXPECT_FALSE(none.any);
  EXPECT_EQ(none.activities, 0);
  EXPECT_DOUBLE_EQ(none.span_us, 0.0);
}

// The candidate contract's check: work on any stream other than the one the call was given (its
// holding activity's stream), even when all of it is on that one other stream.
TEST(activity_span, work_on_a_stream_other_than_the_given_one_is_off_home) {
  const auto own = summarize_activity({{2000, 3000, 7, 1}, {3000, 4000, 7, 1}}, 1000, 9000, 7);
  EXPECT_FALSE(own.off_home);
  const auto moved = summarize_activity({{2000, 3000, 13, 1}}, 1000, 9000, 7);
  EXPECT_TRUE(moved.off_home);
  EXPECT_EQ(moved.off_home_stream, 13u);
  EXPECT_EQ(moved.streams, 1); // one stream: the count alone would not see it
  const auto split = summarize_activity({{2000, 3000, 7, 1}, {2000, 3500, 9, 1}}, 1000, 9000, 7);
  EXPECT_TRUE(split.off_home);
  EXPECT_EQ(split.off_home_stream, 9u);
  EXPECT_FALSE(summarize_activity({{2000, 3000, 13, 1}}, 1000, 9000).off_home); // home unknown
}
