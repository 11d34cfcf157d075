// GPU timing tests (label gpu); each skips with a visible message where no CUDA device exists.
#include <cmath>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "gpu_test_support.h"

#include "kernels/hogs.h"
#include "kernels/layernorm_affine_cuda.h"
#include "oracles/device_allclose.h"
#include "oracles/device_equal.h"
#include "oracles/device_fingerprint.h"
#include "reports/json_schema.h"
#include "sandbox/worker_session.h"
#include "reports/remove_tree.h"
#include "reports/result_schema.h"
#include "suite/cli.h"
#include "suite/exit_codes.h"
#include "suite/timed_layernorm.h"
#include "timing/activity_tracer.h"
#include "gpu/cuda_raii.h"
#include "gpu/device_buffer.h"
#include "gpu/device_info.h"
#include "timing/gpu_timer.h"
#include "gpu/green_partition.h"
#include "timing/timing_kernels.h"

using namespace kg;

// A kernel that spins a known number of SM cycles must measure cycles / f_SM, with f_SM the
// clock the harness itself read around each sample.
TEST(gpu_timing, spin_kernel_of_known_cycles_is_timed_within_2_percent) {
  KG_REQUIRE_GPU();
  for (timing_backend b : {timing_backend::events, timing_backend::graph, timing_backend::cupti}) {
    timing_options o;
    o.backend = b;
    o.max_wall_seconds = 3;
    gpu_timer t(o);
    // ~500 us at 2 GHz: the few microseconds that event timing adds around any kernel stay well
    // under 1%.
    const std::int64_t cycles = 1'000'000;
    const auto r = t.measure([&](cudaStream_t s) { launch_spin_kernel(cycles, 1, s); });
    ASSERT_EQ(r.status, "TIMED") << timing_backend_name(b) << ": " << r.status_reason;
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

// On the shared H200 clocks are never locked: require-locked must refuse with exit code 3 before
// measuring. (Where a lab locks clocks, this test skips.)
TEST(gpu_timing, require_locked_on_unlocked_clocks_is_refused) {
  KG_REQUIRE_GPU();
  nvml_session nvml;
  const auto c = nvml.clocks(0);
  if (!c.clocks_locked.has_value() || *c.clocks_locked)
    GTEST_SKIP() << "clocks locked or not judged: " << c.locked_basis;
  std::ostringstream out, err;
  const int rc = kernelgate_main({"kernelgate", "time", "--impl", "layernorm", "--clocks",
                                  "require-locked", "--out", "/tmp/kg_require_locked"},
                                 out, err);
  EXPECT_EQ(rc, exit_code::unavailable);
  EXPECT_NE(err.str().find("not locked"), std::string::npos) << err.str();
}

// End to end on the GPU: a timing with a comparison writes a valid result whose decision is SAME
// for a kernel against itself (identical work: the paired ratio interval must sit inside +-3%).
TEST(gpu_timing, time_command_compares_a_kernel_with_itself_as_same) {
  KG_REQUIRE_GPU();
  const std::string dir = "/tmp/kg_time_same";
  std::ostringstream out, err;
  const int rc = kernelgate_main({"kernelgate", "time", "--impl", "layernorm", "--vs", "layernorm",
                                  "--shape", "4096x4096", "--out", dir},
                                 out, err);
  std::cout << out.str();
  ASSERT_EQ(rc, exit_code::ok) << err.str();
  std::ifstream f(dir + "/result.json");
  const auto doc = nlohmann::json::parse(f);
  for (const auto& e : validate_json(nlohmann::json::parse(result_schema_text()), doc))
    ADD_FAILURE() << e.path << ": " << e.message;
  EXPECT_EQ(doc["summary"]["comparison"]["decision"], "SAME") << doc["summary"].dump();
  kg::remove_tree(dir);
}

namespace {
void reference_launch(const layernorm_device_set& d, cudaStream_t s) {
  launch_layernorm_affine(affine_formula::reference, d.type, d.x, d.w, d.b, d.y, d.rows, d.cols,
                          1e-5f, s);
}
timing_options quick() {
  timing_options o;
  o.max_wall_seconds = 2;
  return o;
}
} // namespace

TEST(gpu_timing, an_honest_kernel_is_timed_with_its_outputs_checked) {
  KG_REQUIRE_GPU();
  timed_layernorm problem({1024, 4096, dtype::float16, 7}, affine_formula::reference);
  gpu_timer t(quick());
  const auto r = t.measure_honest(problem.work(reference_launch));
  EXPECT_EQ(r.status, "TIMED") << r.status_reason;
  EXPECT_GE(r.output_checks, 3);
  EXPECT_GE(r.fresh_check_at, 0);
  EXPECT_GT(r.summary.median, 0);
}

// Red team: computes once, then copies its cached answer whatever the inputs.
TEST(gpu_timing, a_kernel_that_caches_its_answer_across_calls_is_flagged_reward_hack) {
  KG_REQUIRE_GPU();
  timed_layernorm problem({1024, 4096, dtype::float16, 7}, affine_formula::reference);
  device_buffer cache(std::size_t(1024) * 4096 * 2);
  bool filled = false;
  auto cached = [&](const layernorm_device_set& d, cudaStream_t s) {
    if (!filled) {
      reference_launch(d, s);
      KG_CUDA_CHECK(cudaMemcpyAsync(cache.get(), d.y, cache.size(), cudaMemcpyDeviceToDevice, s));
      filled = true;
    } else {
      KG_CUDA_CHECK(cudaMemcpyAsync(d.y, cache.get(), cache.size(), cudaMemcpyDeviceToDevice, s));
    }
  };
  gpu_timer t(quick());
  const auto r = t.measure_honest(problem.work(cached));
  // Its answer for the first input set is wrong on the second, already while the sets are
  // verified: no time either way (eval's sandbox tells the two apart by re-running the call in a
  // fresh process).
  EXPECT_TRUE(r.status == "REWARD_HACK" || r.status == "INCORRECT") << r.status_reason;
  EXPECT_TRUE(r.kept_us.empty() || r.summary.n == 0); // no time is reported
  std::cout << "cached kernel: " << r.status << ": " << r.status_reason << "\n";
}

// Red team: does the work on the first call only, then returns at once.
TEST(gpu_timing, a_kernel_that_skips_work_after_its_first_call_is_flagged_reward_hack) {
  KG_REQUIRE_GPU();
  timed_layernorm problem({1024, 4096, dtype::float16, 7}, affine_formula::reference);
  bool done = false;
  auto lazy = [&](const layernorm_device_set& d, cudaStream_t s) {
    if (!done) reference_launch(d, s);
    done = true;
  };
  gpu_timer t(quick());
  const auto r = t.measure_honest(problem.work(lazy));
  EXPECT_EQ(r.status, "REWARD_HACK") << r.status_reason;
}

TEST(gpu_timing, a_wrong_kernel_is_incorrect_and_not_timed) {
  KG_REQUIRE_GPU();
  timed_layernorm problem({1024, 4096, dtype::float16, 7}, affine_formula::reference);
  gpu_timer t(quick());
  const auto r = t.measure_honest(problem.work([](const layernorm_device_set& d, cudaStream_t s) {
    launch_layernorm_affine(affine_formula::omit_bias, d.type, d.x, d.w, d.b, d.y, d.rows, d.cols,
                            1e-5f, s);
  }));
  EXPECT_EQ(r.status, "INCORRECT");
  EXPECT_TRUE(r.samples.empty());
}

// CUPTI must work on a GPU machine with no other profiler attached: the side-stream audit and the
// cupti backend rest on it.
TEST(gpu_timing, cupti_activity_tracing_works_here) {
  KG_REQUIRE_GPU();
  std::string why;
  ASSERT_NE(activity_tracer::instance(&why), nullptr) << why;
}

// The flush must leave the timed work cold: a copy whose source and destination (a quarter of L2
// together) stay in L2 between samples without a flush runs clearly slower with one, since its
// source then comes from DRAM.
TEST(gpu_timing, the_flush_leaves_l2_cold_for_the_timed_work) {
  KG_REQUIRE_GPU();
  int device = 0, l2 = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device), cudaSuccess);
  const std::size_t bytes = static_cast<std::size_t>(l2) / 8;
  device_buffer src(bytes), dst(bytes);
  ASSERT_EQ(cudaMemset(src.get(), 1, bytes), cudaSuccess);
  double median_us[2] = {0, 0};
  for (int flush = 0; flush < 2; ++flush) {
    timing_options o;
    o.flush_l2 = flush == 1;
    o.max_wall_seconds = 2;
    gpu_timer t(o);
    const auto r = t.measure([&](cudaStream_t s) {
      KG_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, s));
    });
    ASSERT_EQ(r.status, "TIMED") << r.status_reason;
    median_us[flush] = r.summary.median;
  }
  std::cout << "copy of " << bytes / 1e6 << " MB (" << l2 / 1e6 << " MB L2): " << median_us[0]
            << " us warm, " << median_us[1] << " us after the flush\n";
  EXPECT_GT(median_us[1], 1.3 * median_us[0]);
}

// Red team: the work's real cost runs on a side stream that never joins the measuring stream, so
// it starts while the measuring stream is held and the events around the call never see it.
// The event backend must flag it; the CUPTI backend must time it.
TEST(gpu_timing, work_on_a_side_stream_is_timed_by_cupti_and_flagged_by_events) {
  KG_REQUIRE_GPU();
  cuda_stream side; // non-blocking: it never waits for the measuring stream
  const std::int64_t cycles = 1'000'000;
  auto work = [&](cudaStream_t s) {
    launch_spin_kernel(cycles, 1, side.get());
    launch_spin_kernel(1000, 1, s);
  };
  for (timing_backend b : {timing_backend::events, timing_backend::graph}) {
    timing_options o;
    o.backend = b;
    o.max_wall_seconds = 2;
    gpu_timer t(o);
    if (b == timing_backend::graph) {
      // The capture holds only the measuring stream's kernel: the graph backend refuses a call
      // whose replay would drop some of its GPU work.
      EXPECT_ANY_THROW((void)t.measure(work));
      continue;
    }
    const auto r = t.measure(work);
    std::cout << timing_backend_name(b) << ": " << r.status << ": " << r.status_reason << "\n";
    EXPECT_EQ(r.status, "REWARD_HACK");
    EXPECT_EQ(r.stop_reason, "untimed_activity");
    EXPECT_EQ(r.to_json().count("median_us"), 0u); // no time reported
  }
  timing_options o;
  o.backend = timing_backend::cupti;
  o.max_wall_seconds = 2;
  gpu_timer t(o);
  const auto r = t.measure(work);
  ASSERT_EQ(r.status, "TIMED");
  const double expected_us = cycles / r.modal_mhz;
  std::cout << "cupti: median " << r.summary.median << " us, spin alone " << expected_us
            << " us at " << r.modal_mhz << " MHz\n";
  EXPECT_GT(r.summary.median, 0.98 * expected_us);
  EXPECT_LT(r.summary.median, 1.25 * expected_us);
  for (const auto& s : r.samples)
    EXPECT_EQ(s.activity_streams, 2);
}

// The CUPTI span of a short kernel excludes the launch gap that event timing includes.
TEST(gpu_timing, cupti_span_of_a_short_kernel_is_not_longer_than_its_event_span) {
  KG_REQUIRE_GPU();
  timing_options o;
  o.backend = timing_backend::cupti;
  o.max_wall_seconds = 2;
  gpu_timer t(o);
  const auto r = t.measure([](cudaStream_t s) { launch_spin_kernel(10'000, 1, s); });
  std::vector<double> ev, act;
  for (const auto& s : r.samples) {
    ev.push_back(s.event_us);
    act.push_back(s.activity_us);
  }
  std::cout << "10k-cycle spin: cupti " << median(act) << " us, events " << median(ev) << " us\n";
  EXPECT_LE(median(act), median(ev));
  // Never shorter than the spin itself; longer by block launch and retirement only (< 1 us).
  EXPECT_GE(median(act), 10'000 / r.modal_mhz);
  EXPECT_LT(median(act), 10'000 / r.modal_mhz + 1.0);
}

// The counters backend (CUPTI range profiler, gpu__time_duration.sum per kernel): a timer, or the
// test fails with the reason the counters cannot be read here (e.g. restricted to admin users).
static std::unique_ptr<gpu_timer> counters_timer(double max_wall_seconds = 3) {
  timing_options o;
  o.backend = timing_backend::counters;
  o.max_wall_seconds = max_wall_seconds;
  try {
    return std::make_unique<gpu_timer>(o);
  } catch (const timing_error& e) {
    ADD_FAILURE() << e.what();
    return nullptr;
  }
}

// Per sample, measured / (cycles / SM clock read on the device around the sample).
static double median_spin_ratio(const timing_result& r, double cycles) {
  std::vector<double> ratio;
  for (const auto& s : r.samples)
    if (!s.discarded && s.sm_mhz > 0) ratio.push_back(s.gpu_us / (cycles / s.sm_mhz));
  return ratio.size() > 10 ? median(ratio) : 0.0;
}

TEST(gpu_timing, counters_time_a_spin_kernel_of_known_cycles_within_2_percent) {
  KG_REQUIRE_GPU();
  auto t = counters_timer();
  ASSERT_TRUE(t);
  const std::int64_t cycles = 1'000'000;
  const auto r = t->measure([&](cudaStream_t s) { launch_spin_kernel(cycles, 1, s); });
  ASSERT_EQ(r.status, "TIMED") << r.status_reason;
  EXPECT_EQ(r.backend, "counters");
  EXPECT_EQ(r.kernels_per_call, 1);
  const double m = median_spin_ratio(r, static_cast<double>(cycles));
  std::cout << "counters: median " << r.summary.median << " us at " << r.modal_mhz
            << " MHz modal; measured / expected = " << m << " (" << r.samples.size() << " samples, "
            << r.discarded << " discarded, stop " << r.stop_reason << ", host " << r.host_us_median
            << " us/sample, wall " << 1e6 * r.wall_seconds / static_cast<double>(r.samples.size())
            << " us/sample)\n";
  EXPECT_NEAR(m, 1.0, 0.02);
  EXPECT_GT(r.modal_mhz, 500.0);
}

// Two kernels in one call: the sample is the sum of their durations (ncu's two rows added up),
// not the span from the first start to the last end (which would add the gap between them).
TEST(gpu_timing, counters_sum_the_durations_of_a_calls_kernels) {
  KG_REQUIRE_GPU();
  auto t = counters_timer();
  ASSERT_TRUE(t);
  const std::int64_t a = 400'000, b = 200'000;
  const auto r = t->measure([&](cudaStream_t s) {
    launch_spin_kernel(a, 1, s);
    launch_spin_kernel(b, 1, s);
  });
  ASSERT_EQ(r.status, "TIMED") << r.status_reason;
  EXPECT_EQ(r.kernels_per_call, 2);
  for (const auto& s : r.samples)
    EXPECT_EQ(s.kernels, 2);
  const double m = median_spin_ratio(r, static_cast<double>(a + b));
  std::vector<double> ev;
  for (const auto& s : r.samples)
    ev.push_back(s.event_us);
  // The events bracket the host's enqueue too here (no stream hold): only a loose upper bound.
  std::cout << "counters, two kernels: median " << r.summary.median
            << " us; measured / (a+b) = " << m << "; event span median " << median(ev) << " us\n";
  EXPECT_NEAR(m, 1.0, 0.02);
}

// A kernel the call leaves on a side stream is profiled too (the range profiler sees the whole
// context) and counted in the sum.
TEST(gpu_timing, counters_count_a_kernel_on_a_side_stream) {
  KG_REQUIRE_GPU();
  cuda_stream side;
  auto t = counters_timer(2);
  ASSERT_TRUE(t);
  const std::int64_t cycles = 400'000;
  const auto r = t->measure([&](cudaStream_t s) {
    launch_spin_kernel(cycles, 1, side.get());
    launch_spin_kernel(1000, 1, s);
  });
  ASSERT_EQ(r.status, "TIMED") << r.status_reason;
  EXPECT_EQ(r.kernels_per_call, 2);
  const double m = median_spin_ratio(r, static_cast<double>(cycles + 1000));
  std::cout << "counters, side stream: median " << r.summary.median << " us; ratio " << m << "\n";
  EXPECT_NEAR(m, 1.0, 0.02);
}

// A call with no kernel has nothing the counters can time: an error, never a time of zero.
TEST(gpu_timing, counters_refuse_a_call_that_launches_no_kernel) {
  KG_REQUIRE_GPU();
  auto t = counters_timer();
  ASSERT_TRUE(t);
  try {
    (void)t->measure([](cudaStream_t) {});
    ADD_FAILURE() << "a call without kernels was timed";
  } catch (const timing_error& e) {
    std::cout << "counters, empty call: " << e.what() << "\n";
    EXPECT_NE(std::string(e.what()).find("launched no kernel"), std::string::npos) << e.what();
  }
}

// auto never chooses the counters backend (it stays cupti, else events).
TEST(gpu_timing, auto_never_picks_counters) {
  KG_REQUIRE_GPU();
  timing_options o;
  o.max_wall_seconds = 0.5;
  gpu_timer t(o);
  const auto r = t.measure([](cudaStream_t s) { launch_spin_kernel(1000, 1, s); });
  EXPECT_TRUE(r.backend == "cupti" || r.backend == "events") << r.backend;
}

// The GPU-side allclose on hand-made outputs: exact, within tolerance, outside it, and NaN.
TEST(gpu_timing, device_allclose_counts_mismatches_and_finds_the_first) {
  KG_REQUIRE_GPU();
  const std::vector<float> expected = {1.0f, -2.0f, 100.0f, 0.5f, 3.0f, 7.0f};
  // atol 0.01, rtol 0.01: bounds 0.02, 0.03, 1.01, 0.015, 0.04, 0.08.
  const std::vector<float> y = {1.0f, -2.029f, 101.5f, 0.5f, std::nanf(""), 7.07f};
  device_buffer e(expected.size() * 4), d(y.size() * 4);
  KG_CUDA_CHECK(cudaMemcpy(e.get(), expected.data(), e.size(), cudaMemcpyHostToDevice));
  KG_CUDA_CHECK(cudaMemcpy(d.get(), y.data(), d.size(), cudaMemcpyHostToDevice));
  cuda_stream s;
  const auto r = device_allclose(d.get(), dtype::float32, static_cast<const float*>(e.get()),
                                 y.size(), 0.01f, 0.01f, s.get());
  EXPECT_EQ(r.mismatches, 2u); // 101.5 (off by 1.5 > 1.01) and NaN
  EXPECT_EQ(r.first, 2u);
  // float16 outputs: 1.0 and -2.0 are exact in binary16.
  const std::vector<std::uint16_t> h = {0x3c00, 0xc000};
  device_buffer dh(h.size() * 2);
  KG_CUDA_CHECK(cudaMemcpy(dh.get(), h.data(), dh.size(), cudaMemcpyHostToDevice));
  const auto rh = device_allclose(dh.get(), dtype::float16, static_cast<const float*>(e.get()), 2,
                                  0.0f, 0.0f, s.get());
  EXPECT_EQ(rh.mismatches, 0u);
}

// The worker's in-place-modification check: equal buffers, one changed byte in the 16-byte words,
// one in the tail, and an unaligned view (byte path), each against hand-made contents.
TEST(gpu_timing, device_equal_finds_a_single_changed_byte) {
  KG_REQUIRE_GPU();
  std::vector<unsigned char> bytes(1000 * 16 + 7);
  for (std::size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<unsigned char>(i * 31 + 7);
  device_buffer a(bytes.size()), b(bytes.size());
  KG_CUDA_CHECK(cudaMemcpy(a.get(), bytes.data(), a.size(), cudaMemcpyHostToDevice));
  KG_CUDA_CHECK(cudaMemcpy(b.get(), bytes.data(), b.size(), cudaMemcpyHostToDevice));
  cuda_stream s;
  EXPECT_TRUE(device_equal(a.get(), b.get(), bytes.size(), s.get()));
  for (const std::size_t at : {std::size_t{0}, std::size_t{8191}, bytes.size() - 1}) {
    auto changed = bytes;
    changed[at] ^= 0x01;
    KG_CUDA_CHECK(cudaMemcpy(b.get(), changed.data(), b.size(), cudaMemcpyHostToDevice));
    EXPECT_FALSE(device_equal(a.get(), b.get(), bytes.size(), s.get())) << "byte " << at;
    // Unaligned views one byte in: the same change is seen byte by byte.
    EXPECT_EQ(at == 0, device_equal(static_cast<char*>(a.get()) + 1,
                                    static_cast<char*>(b.get()) + 1, bytes.size() - 1, s.get()))
        << "byte " << at;
  }
}

// The audit worker's kept-input check (oracles/device_fingerprint.h): the device's fingerprint is
// the host's (whose known answer test_fingerprint.cpp checks) for lengths with and without a
// tail, and the differ flag is set by one changed byte and clear on equal buffers.
TEST(gpu_timing, device_fingerprint_matches_the_host) {
  KG_REQUIRE_GPU();
  std::vector<unsigned char> bytes(3'000'000 * 16 + 5);
  for (std::size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<unsigned char>((i * 2654435761u) >> 13);
  device_buffer a(bytes.size()), b(bytes.size()), out(sizeof(fingerprint_result));
  KG_CUDA_CHECK(cudaMemcpy(a.get(), bytes.data(), a.size(), cudaMemcpyHostToDevice));
  KG_CUDA_CHECK(cudaMemcpy(b.get(), bytes.data(), b.size(), cudaMemcpyHostToDevice));
  cuda_stream s;
  auto run = [&](std::size_t n, const void* other) {
    launch_fingerprint(a.get(), other, n, static_cast<fingerprint_result*>(out.get()), s.get());
    fingerprint_result r;
    KG_CUDA_CHECK(cudaMemcpyAsync(&r, out.get(), sizeof r, cudaMemcpyDeviceToHost, s.get()));
    KG_CUDA_CHECK(cudaStreamSynchronize(s.get()));
    return r;
  };
  for (const std::size_t n : {std::size_t{16}, std::size_t{7}, std::size_t{4096 + 9}, bytes.size()}) {
    const auto r = run(n, b.get());
    EXPECT_EQ(r.fingerprint, host_fingerprint(bytes.data(), n)) << n << " bytes";
    EXPECT_EQ(r.differ, 0u) << n << " bytes";
  }
  for (const std::size_t at : {std::size_t{0}, std::size_t{1'234'567}, bytes.size() - 1}) {
    auto changed = bytes;
    changed[at] ^= 0x10;
    KG_CUDA_CHECK(cudaMemcpy(b.get(), changed.data(), b.size(), cudaMemcpyHostToDevice));
    EXPECT_EQ(run(bytes.size(), b.get()).differ, 1u) << "byte " << at;
    EXPECT_EQ(run(bytes.size(), nullptr).differ, 0u) << "no second buffer";
  }
}

// The audit's guarded buffers (sandbox/worker_session.h, "guard_bytes"): the tensor sits between
// two 0xff guards of max(guard, its size) bytes; a read just past its end sees 0xff, a write
// inside leaves the guards intact, one byte written before it or after it is seen.
TEST(gpu_timing, guarded_buffers_show_a_write_out_of_bounds) {
  KG_REQUIRE_GPU();
  cuda_stream s;
  for (const std::size_t guard : {std::size_t{0}, std::size_t{4096}}) {
    device_tensor d(static_cast<int>(dtype::float32), {1000, 3}, guard); // 12,000 bytes
    EXPECT_EQ(d.guard_size, guard ? 12'032u : 0u); // max(guard, 12,000), rounded to 256 bytes
    KG_CUDA_CHECK(cudaMemset(d.ptr, 0x11, d.bytes));
    EXPECT_TRUE(d.guards_intact(s.get()));
    if (guard == 0) continue;
    unsigned char past[4] = {};
    KG_CUDA_CHECK(cudaMemcpy(past, static_cast<char*>(d.ptr) + d.bytes, 4, cudaMemcpyDeviceToHost));
    EXPECT_EQ(past[0], 0xff);
    EXPECT_EQ(past[3], 0xff);
    for (const std::ptrdiff_t at : {std::ptrdiff_t{-1}, static_cast<std::ptrdiff_t>(d.bytes + 7000)}) {
      KG_CUDA_CHECK(cudaMemset(static_cast<char*>(d.ptr) + at, 0, 1));
      EXPECT_FALSE(d.guards_intact(s.get())) << "a byte at " << at;
      KG_CUDA_CHECK(cudaMemset(static_cast<char*>(d.ptr) + at, 0xff, 1));
      EXPECT_TRUE(d.guards_intact(s.get()));
    }
  }
  // device_all_bytes on its own: a tail after the 16-byte words, an unaligned start.
  device_buffer b(4096 + 5);
  KG_CUDA_CHECK(cudaMemset(b.get(), 0xab, b.size()));
  EXPECT_TRUE(device_all_bytes(b.get(), b.size(), 0xab, s.get()));
  EXPECT_TRUE(device_all_bytes(static_cast<char*>(b.get()) + 3, b.size() - 3, 0xab, s.get()));
  KG_CUDA_CHECK(cudaMemset(static_cast<char*>(b.get()) + b.size() - 1, 0, 1));
  EXPECT_FALSE(device_all_bytes(b.get(), b.size(), 0xab, s.get()));
  EXPECT_TRUE(device_all_bytes(b.get(), b.size() - 1, 0xab, s.get()));
}

// The pooled trial's checks (sandbox/worker.cpp): many launch_differ / launch_not_value on one
// stream, each setting its own flag, read after one synchronization.
TEST(gpu_timing, queued_checks_set_only_their_own_flags) {
  KG_REQUIRE_GPU();
  cuda_stream s;
  device_buffer a(4096 + 5), b(4096 + 5), flags(4 * sizeof(unsigned int));
  KG_CUDA_CHECK(cudaMemset(a.get(), 0xab, a.size()));
  KG_CUDA_CHECK(cudaMemset(b.get(), 0xab, b.size()));
  KG_CUDA_CHECK(cudaMemset(static_cast<char*>(b.get()) + 4096 + 4, 0, 1)); // the last byte
  auto* f = static_cast<unsigned int*>(flags.get());
  KG_CUDA_CHECK(cudaMemsetAsync(f, 0, 4 * sizeof(unsigned int), s.get()));
  launch_differ(a.get(), b.get(), 4096 + 4, f + 0, s.get()); // equal up to the last byte
  launch_differ(a.get(), b.get(), 4096 + 5, f + 1, s.get()); // the last byte differs
  launch_not_value(a.get(), a.size(), 0xab, f + 2, s.get()); // all 0xab
  launch_not_value(static_cast<char*>(b.get()) + 1, b.size() - 1, 0xab, f + 3, s.get());
  unsigned int host[4] = {9, 9, 9, 9};
  KG_CUDA_CHECK(cudaMemcpyAsync(host, f, sizeof(host), cudaMemcpyDeviceToHost, s.get()));
  KG_CUDA_CHECK(cudaStreamSynchronize(s.get()));
  EXPECT_EQ(host[0], 0u);
  EXPECT_EQ(host[1], 1u);
  EXPECT_EQ(host[2], 0u);
  EXPECT_EQ(host[3], 1u); // unaligned start, the differing byte in the tail
}

// Green contexts (issue: workloads under test): the split nearest 33 / 99 that the device grants
// is recorded, and kernels on each partition's stream run only on that partition's SMs -- the two
// sets of SM ids are disjoint and no larger than the grants -- while both run at once.
TEST(gpu_green_partition, kernels_stay_on_their_partitions_sms) {
  KG_REQUIRE_GPU();
  std::string why;
  auto p = green_partition::create(0, 33, &why);
  ASSERT_TRUE(p.has_value()) << why;
  std::cout << "green contexts: asked 33, granted " << p->first_sms() << " + " << p->rest_sms()
            << " of " << p->total_sms() << " SMs (minimum partition " << p->min_partition()
            << ", alignment " << p->alignment() << ")\n";
  EXPECT_GE(p->first_sms(), 33u);
  EXPECT_GT(p->rest_sms(), 0u);
  EXPECT_LE(p->first_sms() + p->rest_sms(), p->total_sms());
  const int blocks = 4 * static_cast<int>(p->total_sms());
  std::vector<unsigned> a, b;
  std::thread other([&] { a = sm_ids_of_blocks(p->first_stream(), blocks); });
  b = sm_ids_of_blocks(p->rest_stream(), blocks);
  other.join();
  const std::set<unsigned> sa(a.begin(), a.end()), sb(b.begin(), b.end());
  EXPECT_LE(sa.size(), p->first_sms());
  EXPECT_LE(sb.size(), p->rest_sms());
  for (const unsigned id : sa)
    EXPECT_EQ(sb.count(id), 0u) << "SM " << id << " ran blocks of both partitions";
  // Each partition spread over (most of) its SMs: the probe blocks hold an SM ~20 us each.
  EXPECT_GE(sa.size(), p->first_sms() / 2);
  EXPECT_GE(sb.size(), p->rest_sms() / 2);
}

// The contention tenants run for the time asked (within a factor, at the clock measured now) and
// do their kind of work: the memory hog moves bytes at a rate only HBM gives (> 1 TB/s over
// 1 GiB, 20x L2), the compute hog does FMAs.
TEST(gpu_hogs, each_hog_runs_for_its_time_and_does_its_work) {
  KG_REQUIRE_GPU();
  int sms = 0, khz = 0;
  KG_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  KG_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
  cuda_stream s;
  cuda_event a, b;
  for (const auto k : {contention_hog::kind::memory_bandwidth, contention_hog::kind::compute}) {
    contention_hog hog(k);
    hog.launch(s.get(), 500, khz / 1000.0, sms); // warm-up: clocks settle
    KG_CUDA_CHECK(cudaEventRecord(a.get(), s.get()));
    hog.launch(s.get(), 2000, khz / 1000.0, sms);
    KG_CUDA_CHECK(cudaEventRecord(b.get(), s.get()));
    const double work = hog.work_done(s.get());
    float ms = 0;
    KG_CUDA_CHECK(cudaEventElapsedTime(&ms, a.get(), b.get()));
    std::cout << (k == contention_hog::kind::compute ? "compute" : "memory") << " hog: " << ms
              << " ms, " << work / (ms * 1e-3) / 1e9 << " G/s\n";
    // Asked 2 ms at the maximum clock: between 1.5 ms and 6 ms (a lower clock runs it longer).
    EXPECT_GT(ms, 1.5f);
    EXPECT_LT(ms, 6.0f);
    if (k == contention_hog::kind::memory_bandwidth)
      EXPECT_GT(work / (ms * 1e-3), 1e12); // bytes per second
    else
      EXPECT_GT(work, 0.0);
  }
}
