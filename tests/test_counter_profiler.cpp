// The counters backend's pure parts (the sample from per-kernel durations, the reasons it gives
// when it cannot run) and, on a machine without a GPU, its refusal as one timing_error.
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "timing/counter_profiler.h"
#include "gpu/device_info.h"
#include "timing/gpu_timer.h"

using namespace kg;

TEST(counter_sample, is_the_sum_of_the_kernels_durations_in_microseconds) {
  EXPECT_DOUBLE_EQ(counter_sample_us({1460.0}), 1.46);
  // Two kernels: their durations add up (ncu's two rows), the gap between them is not counted.
  EXPECT_DOUBLE_EQ(counter_sample_us({4900.0, 15520.0}), 20.42);
  EXPECT_DOUBLE_EQ(counter_sample_us({0.0, 32.0}), 0.032);
}

TEST(counter_sample, a_call_without_kernels_is_an_error_not_zero) {
  try {
    (void)counter_sample_us({});
    FAIL() << "no kernels must not read as a time";
  } catch (const timing_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("launched no kernel"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos);
  }
}

TEST(counter_sample, a_duration_that_is_not_a_time_is_an_error) {
  EXPECT_THROW((void)counter_sample_us({1000.0, -1.0}), timing_error);
  EXPECT_THROW((void)counter_sample_us({std::numeric_limits<double>::quiet_NaN()}), timing_error);
  EXPECT_THROW((void)counter_sample_us({std::numeric_limits<double>::infinity()}), timing_error);
}

TEST(counter_profiler, refusals_say_what_to_do) {
  EXPECT_NE(counter_profiler_hint(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES).find("administrators"),
            std::string::npos);
  EXPECT_NE(counter_profiler_hint(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
                .find("another profiler"),
            std::string::npos);
  EXPECT_NE(counter_profiler_hint(CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED).find("does not support"),
            std::string::npos);
  EXPECT_EQ(counter_profiler_hint(CUPTI_SUCCESS), "");
}

// Where there is no GPU the backend is unavailable, with the reason, in one line (kernelgate time
// prints it and exits 3). On a GPU machine the GPU tests cover set-up instead.
TEST(counter_profiler, without_a_gpu_is_one_timing_error_naming_why) {
  if (query_device(0).available) GTEST_SKIP() << "a GPU is present: see the gpu tests";
  try {
    counter_profiler p;
    FAIL() << "set up without a GPU";
  } catch (const timing_error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("timing backend 'counters' unavailable: ", 0), 0u) << what;
    EXPECT_GT(what.size(), std::string("timing backend 'counters' unavailable: ").size());
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}
