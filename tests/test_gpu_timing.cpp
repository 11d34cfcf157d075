// GPU timing tests (label gpu); each skips with a visible message where no CUDA device exists.
#include <cmath>
#include <iostream>

#include <gtest/gtest.h>

#include "timing/device_info.h"
#include "timing/gpu_timer.h"
#include "timing/timing_kernels.h"

using namespace kg;

#define KG_REQUIRE_GPU()                                                                           \
  do {                                                                                             \
    const auto d = query_device(0);                                                                \
    if (!d.available) GTEST_SKIP() << "GPU test skipped: " << d.reason;                            \
  } while (0)

// A kernel that spins a known number of SM cycles must measure cycles / f_SM, with f_SM the
// clock the harness itself read around each sample.
TEST(gpu_timing, spin_kernel_of_known_cycles_is_timed_within_2_percent) {
  KG_REQUIRE_GPU();
  for (timing_backend b : {timing_backend::events, timing_backend::graph}) {
    timing_options o;
    o.backend = b;
    o.max_wall_seconds = 3;
    gpu_timer t(o);
    const std::int64_t cycles = 200'000; // ~100 us at 2 GHz: far above event resolution
    const auto r = t.measure([&](cudaStream_t s) { launch_spin_kernel(cycles, 1, s); });
    std::vector<double> ratio;
    for (const auto& s : r.samples)
      if (!s.discarded && s.sm_mhz > 0) ratio.push_back(s.gpu_us / (cycles / s.sm_mhz));
    ASSERT_GT(ratio.size(), 10u);
    const double m = median(ratio);
    std::cout << timing_backend_name(b) << ": median " << r.summary.median << " us at "
              << r.modal_mhz << " MHz modal; measured / expected = " << m << " ("
              << r.samples.size() << " samples, " << r.discarded << " discarded, stop "
              << r.stop_reason << ", host " << r.host_us_median << " us/sample)\n";
    EXPECT_NEAR(m, 1.0, 0.02) << timing_backend_name(b);
    EXPECT_GT(r.modal_mhz, 500.0);
  }
}

TEST(gpu_timing, work_that_synchronizes_inside_the_timed_call_is_an_error_not_a_hang) {
  KG_REQUIRE_GPU();
  timing_options o;
  o.warmup = 0;
  o.blocking_timeout_ns = 200'000'000; // 0.2 s
  gpu_timer t(o);
  auto p = t.prepare([](cudaStream_t s) {
    launch_spin_kernel(1000, 1, s);
    (void)cudaStreamSynchronize(s); // waits for the blocking kernel, which waits for the host
  });
  EXPECT_THROW(t.sample(*p), timing_error);
}
