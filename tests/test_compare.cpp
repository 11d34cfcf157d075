// `kernelgate compare` on hand-made suite runs: result.json folders written under the build tree
// with samples from seeded streams, compared through the library (decisions as data) and through
// the CLI (exit codes, one-line errors, the result file). Each expected decision is argued in a
// comment from the noise and the sample size, so it does not depend on the seed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/rng.h"
#include "cli_run.h"
#include "reports/environment.h"
#include "reports/json_input.h"
#include "reports/remove_tree.h"
#include "reports/run_compare.h"
#include "suite/exit_codes.h"

using namespace kg;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

using test::lines;
using test::run;

// n samples around `mean` with coefficient of variation `cv`: normal, from a seeded stream.
std::vector<double> normal_samples(double mean, double cv, std::uint64_t seed, int n = 30) {
  rng r(seed, stream_id("compare-test"));
  std::vector<double> x(static_cast<std::size_t>(n));
  for (auto& v : x)
    v = mean * (1.0 + cv * r.normal());
  return x;
}

std::vector<double> scaled(std::vector<double> x, double factor) {
  for (auto& v : x)
    v *= factor;
  return x;
}

json metric(const std::string& name = "kernel_seconds", const std::string& direction = "lower",
            const std::string& unit = "s") {
  return {{"name", name}, {"direction", direction}, {"unit", unit}};
}

json gates(std::vector<std::pair<std::string, bool>> g) {
  json a = json::array();
  for (const auto& [name, pass] : g)
    a.push_back({{"name", name}, {"pass", pass}, {"detail", pass ? "ok" : "failed"}});
  return a;
}

// A "suite_workload" record as `kernelgate run` writes it (docs: the issue 20 contract).
json workload(const std::string& id, const std::vector<double>& samples, json m = metric(),
              json g = gates({{"oracle_fp64", true}})) {
  json rec = {{"type", "suite_workload"}, {"id", id},
              {"level", "kernel"},        {"kind", "gemv"},
              {"params", json::object()}, {"metric", std::move(m)},
              {"samples", samples},       {"sol", nullptr},
              {"gates", std::move(g)},    {"roles", json::object()},
              {"wall_seconds", 1.5}};
  if (!samples.empty()) {
    auto s = samples;
    std::sort(s.begin(), s.end());
    rec["estimate"] = s[s.size() / 2];
    rec["ci95"] = {s.front(), s.back()};
  }
  return rec;
}

json errored(const std::string& id, const std::string& error) {
  json rec = workload(id, {}, metric(), gates({{"oracle_fp64", false}}));
  rec.erase("samples");
  rec["error"] = error;
  return rec;
}

// The environment of an H200 run with clocks observed (not locked); tests change one field.
json h200_environment() {
  static const json base = collect_environment(); // every field the schema requires
  json env = base;
  env["gpu"]["available"] = true;
  env["gpu"]["name"] = "NVIDIA H200";
  env["driver"]["nvml_driver_version"] = "570.86.15";
  env["driver"]["cuda_driver_version"] = 12080;
  env["clocks"]["locked"] = false;
  env["clocks"]["sm_application_mhz"] = 1980;
  return env;
}

struct run_spec {
  std::vector<json> records;
  json environment = h200_environment();
  json config = {{"suite", "smoke"},
                 {"suite_sha256", std::string(64, 'a')},
                 {"clock_policy", "observe"},
                 {"repeats", 30},
                 {"overrides", json::object()}};
  std::string status = "complete"; // summary.status
};

class compare_test : public ::testing::Test {
protected:
  void SetUp() override {
    // Under the build tree, never /tmp; one folder per test and process, removed at the end.
    dir_ = fs::path(KG_TEST_SCRATCH_DIR) /
           ("kg_compare_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(getpid()));
    remove_tree(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { remove_tree(dir_); }

  // Writes a suite_run result folder NAME/result.json; returns the folder.
  std::string write_run(const std::string& name, const run_spec& r) {
    const auto folder = dir_ / name;
    fs::create_directories(folder);
    json doc = {{"schema", "kernelgate.result/1"},
                {"kind", "suite_run"},
                {"created", "2026-03-01T00:00:00Z"},
                {"finished", "2026-03-01T00:10:00Z"},
                {"argv", {"kernelgate", "run", "--suite", "smoke"}},
                {"environment", r.environment},
                {"config", r.config},
                {"records", r.records},
                {"summary", {{"status", r.status}, {"workloads", r.records.size()}}}};
    std::ofstream(folder / "result.json") << doc.dump();
    return folder.string();
  }

  run_comparison compare(const std::string& base, const std::string& next,
                         compare_options opt = {}) {
    return compare_runs(load_suite_run(base, "BASE"), load_suite_run(next, "NEW"), opt);
  }

  fs::path dir_;
};

// The id by value (a view): a reference parameter bound to a temporary would make g++ warn that
// the returned reference may dangle.
const workload_comparison& find(const run_comparison& c, std::string_view id) {
  for (const auto& w : c.workloads)
    if (w.id == id) return w;
  throw std::runtime_error("no workload " + std::string(id));
}

const std::string id_a = "kernel.gemv.down.b1";
const std::string id_b = "kernel.attention.b1.ctx2048";
const std::string id_c = "kernel.argmax.b1";

// ---- decisions ---------------------------------------------------------------------------------

// 30 samples at 1% noise: the median's standard error is about 1.25 x 1% / sqrt(30) = 0.23%, the
// ratio's about 0.32%, so its 95% interval is about 1.10 +- 0.007: wholly above 1.03.
TEST_F(compare_test, ten_percent_slower_is_slower_and_exits_1) {
  const auto base = write_run("base", {{workload(id_a, normal_samples(12e-6, 0.01, 1))}});
  const auto next = write_run("new", {{workload(id_a, normal_samples(13.2e-6, 0.01, 2))}});
  const auto c = compare(base, next);
  const auto& w = find(c, id_a);
  EXPECT_EQ(w.status, compare_status::slower);
  ASSERT_TRUE(w.ratio);
  EXPECT_GT(w.ratio->lo, 1.03);
  EXPECT_NEAR(w.ratio->ratio, 1.10, 0.02);
  EXPECT_TRUE(c.fails());
  const auto r = run({"compare", base, next});
  EXPECT_EQ(r.rc, exit_code::failures) << r.out << r.err;
  EXPECT_NE(r.out.find("compare: 1 paired: 1 SLOWER, 0 FASTER, 0 SAME, 0 AMBIGUOUS; 0 missing; "
                       "0 gate changes -> FAIL"),
            std::string::npos)
      << r.out;
}

// The mirror image: about 0.90 +- 0.006, wholly below 0.97.
TEST_F(compare_test, ten_percent_faster_is_faster_and_exits_0) {
  const auto base = write_run("base", {{workload(id_a, normal_samples(12e-6, 0.01, 3))}});
  const auto next = write_run("new", {{workload(id_a, normal_samples(10.8e-6, 0.01, 4))}});
  const auto c = compare(base, next);
  EXPECT_EQ(find(c, id_a).status, compare_status::faster);
  EXPECT_LT(find(c, id_a).ratio->hi, 0.97);
  EXPECT_FALSE(c.fails());
  const auto r = run({"compare", base, next});
  EXPECT_EQ(r.rc, exit_code::ok) << r.out << r.err;
  EXPECT_NE(r.out.find("1 FASTER"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-> PASS"), std::string::npos) << r.out;
}

// Constant samples: every resampled median is the same number, so the ratio is 1 in every
// resample and the interval is exactly [1, 1]. The same non-constant draws on both sides give
// about 1 +- 0.007 (each side is resampled on its own), well inside [0.97, 1.03].
TEST_F(compare_test, identical_samples_are_same) {
  const std::vector<double> flat(30, 12e-6);
  const auto noisy = normal_samples(12e-6, 0.01, 5);
  const auto base = write_run("base", {{workload(id_a, flat), workload(id_b, noisy)}});
  const auto next = write_run("new", {{workload(id_a, flat), workload(id_b, noisy)}});
  const auto c = compare(base, next);
  const auto& a = find(c, id_a);
  EXPECT_EQ(a.status, compare_status::same);
  EXPECT_EQ(a.ratio->lo, 1.0);
  EXPECT_EQ(a.ratio->hi, 1.0);
  EXPECT_EQ(find(c, id_b).status, compare_status::same);
  EXPECT_EQ(run({"compare", base, next}).rc, exit_code::ok);
}

// Independent draws of one distribution: the estimate is within 3 standard errors (1%) of 1 and
// the interval about +-0.7% around it, inside [0.97, 1.03].
TEST_F(compare_test, the_same_distribution_drawn_twice_is_same) {
  const auto base = write_run("base", {{workload(id_a, normal_samples(12e-6, 0.01, 6))}});
  const auto next = write_run("new", {{workload(id_a, normal_samples(12e-6, 0.01, 7))}});
  const auto& w = find(compare(base, next), id_a);
  EXPECT_EQ(w.status, compare_status::same);
  EXPECT_GE(w.ratio->lo, 0.97);
  EXPECT_LE(w.ratio->hi, 1.03);
}

// 2% slower at 10% noise: the ratio's standard error is about 3.2%, so the interval is about
// 13% wide -- wider than the whole SAME band (6%) -- and centred near 1.02: it straddles 1.03 and
// cannot be called. 3% slower as an exact scaled copy: the estimate is exactly 1.03, the interval
// has width around it, so it straddles the SLOWER boundary.
TEST_F(compare_test, a_small_change_in_wide_noise_or_at_the_boundary_is_ambiguous) {
  const auto wide = normal_samples(12e-6, 0.10, 8);
  const auto at_edge = normal_samples(30e-6, 0.01, 9);
  const auto base = write_run("base", {{workload(id_a, wide), workload(id_b, at_edge)}});
  const auto next = write_run("new", {{workload(id_a, normal_samples(12.24e-6, 0.10, 10)),
                                       workload(id_b, scaled(at_edge, 1.03))}});
  const auto c = compare(base, next);
  const auto& a = find(c, id_a);
  EXPECT_EQ(a.status, compare_status::ambiguous);
  EXPECT_GT(a.ratio->hi - a.ratio->lo, 0.06);
  EXPECT_LT(a.ratio->lo, 1.03);
  const auto& b = find(c, id_b);
  EXPECT_EQ(b.status, compare_status::ambiguous);
  EXPECT_NEAR(b.ratio->ratio, 1.03, 1e-12);
  EXPECT_LT(b.ratio->lo, 1.03);
  EXPECT_GT(b.ratio->hi, 1.03);
  EXPECT_FALSE(c.fails()); // AMBIGUOUS is not a regression
  const auto r = run({"compare", base, next});
  EXPECT_EQ(r.rc, exit_code::ok) << r.out << r.err;
  EXPECT_NE(r.out.find("2 AMBIGUOUS"), std::string::npos) << r.out;
}

// tokens/s 10% lower: the time-like ratio is BASE/NEW = 1/0.9 = 1.11, so SLOWER.
TEST_F(compare_test, a_higher_is_better_metric_ten_percent_lower_is_slower) {
  const auto tps = metric("tokens_per_second", "higher", "tokens/s");
  const auto base = write_run("base", {{workload("serving.throughput.all1.512-2048.solo",
                                                 normal_samples(2000, 0.01, 11), tps)}});
  const auto next = write_run("new", {{workload("serving.throughput.all1.512-2048.solo",
                                                normal_samples(1800, 0.01, 12), tps)}});
  const auto c = compare(base, next);
  const auto& w = find(c, "serving.throughput.all1.512-2048.solo");
  EXPECT_EQ(w.status, compare_status::slower);
  EXPECT_NEAR(w.ratio->ratio, 1.0 / 0.9, 0.02);
  EXPECT_EQ(run({"compare", base, next}).rc, exit_code::failures);
}

// ---- samples paired by key ----------------------------------------------------------------------

// Serving's samples: one per arrival seed, a factor of 10 apart between seeds (a trace of a few
// sequences against one of twenty), each replayed within a few percent by the same seed.
json keyed(const std::string& id, const std::vector<double>& samples,
           const std::vector<std::uint64_t>& keys, json m = metric("p99_itl_ms", "lower", "ms")) {
  auto rec = workload(id, samples, std::move(m));
  rec["sample_keys"] = keys;
  return rec;
}
const std::string id_p99 = "serving.p99.production.512-2048.solo";

TEST_F(compare_test, samples_with_the_same_keys_are_compared_pair_by_pair) {
  // Every seed 1% slower: ratios 1.01, 1.01, 1.01, so the median ratio and both ends of its
  // interval are 1.01: SAME. Unpaired, the medians are 36 and 36.36 but the resampled medians
  // range over 3.6..55: AMBIGUOUS.
  const std::vector<double> b = {3.6, 36.0, 55.0};
  std::vector<double> n;
  for (const double v : b)
    n.push_back(v * 1.01);
  const auto base = write_run("base", {{keyed(id_p99, b, {31, 32, 33})}});
  const auto next = write_run("new", {{keyed(id_p99, n, {31, 32, 33})}});
  const auto c = compare(base, next);
  const auto& w = find(c, id_p99);
  ASSERT_TRUE(w.ratio);
  EXPECT_TRUE(w.ratio->paired);
  EXPECT_EQ(w.status, compare_status::same);
  EXPECT_NEAR(w.ratio->ratio, 1.01, 1e-12);
  EXPECT_NEAR(w.ratio->lo, 1.01, 1e-12);
  EXPECT_NEAR(w.ratio->hi, 1.01, 1e-12);
  const auto unpaired = compare(write_run("ub", {{workload(id_p99, b, w.metric)}}),
                                write_run("un", {{workload(id_p99, n, w.metric)}}));
  EXPECT_FALSE(find(unpaired, id_p99).ratio->paired);
  EXPECT_EQ(find(unpaired, id_p99).status, compare_status::ambiguous);
  EXPECT_LT(find(unpaired, id_p99).ratio->lo, 0.2);
  // The table marks a paired ratio with "p".
  const auto r = run({"compare", base, next});
  EXPECT_NE(r.out.find("1.010 [1.010, 1.010] p"), std::string::npos) << r.out;
}

TEST_F(compare_test, pairs_follow_the_keys_not_the_order) {
  // NEW lists the seeds in another order, every one 10% slower: paired by key the ratios are all
  // 1.10 (SLOWER); paired by position they would be 0.11, 1.65, 16.8.
  const auto base = write_run("base", {{keyed(id_p99, {3.6, 36.0, 55.0}, {31, 32, 33})}});
  const auto next = write_run("new", {{keyed(id_p99, {60.5, 3.96, 39.6}, {33, 31, 32})}});
  const auto c = compare(base, next);
  const auto& w = find(c, id_p99);
  EXPECT_EQ(w.status, compare_status::slower);
  EXPECT_NEAR(w.ratio->lo, 1.10, 1e-9);
  EXPECT_NEAR(w.ratio->hi, 1.10, 1e-9);
  EXPECT_TRUE(c.fails());
  // A higher-is-better metric: tokens/s 10% lower on every seed is BASE/NEW = 1/0.9: SLOWER.
  const auto tps = metric("tokens_per_second", "higher", "tokens/s");
  const std::string id_t = "serving.throughput.production.512-2048.solo";
  const auto tb = write_run("tb", {{keyed(id_t, {250.0, 920.0, 1400.0}, {30, 31, 32}, tps)}});
  const auto tn = write_run("tn", {{keyed(id_t, {225.0, 828.0, 1260.0}, {30, 31, 32}, tps)}});
  const auto& t = find(compare(tb, tn), id_t);
  EXPECT_EQ(t.status, compare_status::slower);
  EXPECT_NEAR(t.ratio->ratio, 1.0 / 0.9, 1e-9);
}

TEST_F(compare_test, mixed_pair_ratios_or_other_keys_do_not_decide) {
  // Ratios 0.99, 1.01, 1.05: the percentile interval of their median spans 0.99..1.05, past
  // 1.03 on one side only: AMBIGUOUS.
  const auto base = write_run("base", {{keyed(id_p99, {10.0, 20.0, 40.0}, {1, 2, 3})}});
  const auto next = write_run("new", {{keyed(id_p99, {9.9, 20.2, 42.0}, {1, 2, 3})}});
  const auto& w = find(compare(base, next), id_p99);
  EXPECT_TRUE(w.ratio->paired);
  EXPECT_EQ(w.status, compare_status::ambiguous);
  EXPECT_NEAR(w.ratio->lo, 0.99, 1e-9);
  EXPECT_NEAR(w.ratio->hi, 1.05, 1e-9);
  // Other seeds on one side (another suite version): nothing to pair, the unpaired ratio.
  const auto other = write_run("other", {{keyed(id_p99, {9.9, 20.2, 42.0}, {1, 2, 4})}});
  const auto& u = find(compare(base, other), id_p99);
  EXPECT_FALSE(u.ratio->paired);
  EXPECT_EQ(u.status, compare_status::ambiguous);
}

// The minimum effect moves the bands: 10% slower is inside [0.8, 1.2].
TEST_F(compare_test, min_effect_sets_the_band) {
  const auto base = write_run("base", {{workload(id_a, normal_samples(12e-6, 0.01, 13))}});
  const auto next = write_run("new", {{workload(id_a, normal_samples(13.2e-6, 0.01, 14))}});
  compare_options opt;
  opt.min_effect = 0.2;
  EXPECT_EQ(find(compare(base, next, opt), id_a).status, compare_status::same);
  EXPECT_EQ(run({"compare", base, next, "--min-effect", "0.2"}).rc, exit_code::ok);
}

// ---- what cannot be decided --------------------------------------------------------------------

TEST_F(compare_test, workloads_missing_on_either_side_are_listed) {
  const auto x = normal_samples(12e-6, 0.01, 15);
  const auto base = write_run("base", {{workload(id_a, x), workload(id_b, x)}});
  run_spec cut{{workload(id_b, x), workload(id_c, x)}};
  cut.status = "interrupted"; // stopped by SIGINT: its result.json is complete but the run is not
  const auto next = write_run("new", cut);
  const auto c = compare(base, next);
  EXPECT_EQ(c.only_in_base, std::vector<std::string>{id_a});
  EXPECT_EQ(c.only_in_new, std::vector<std::string>{id_c});
  EXPECT_EQ(c.paired(), 1u);
  EXPECT_EQ(find(c, id_a).status, compare_status::missing);
  EXPECT_EQ(find(c, id_a).missing_from, "NEW");
  EXPECT_EQ(find(c, id_c).missing_from, "BASE");
  const auto r = run({"compare", base, next});
  EXPECT_EQ(r.rc, exit_code::ok) << r.err;
  EXPECT_NE(r.out.find("only in BASE, missing in NEW (1):\n  " + id_a), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("only in NEW, missing in BASE (1):\n  " + id_c), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("; 2 missing (1 only in BASE, 1 only in NEW);"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("note: NEW's run did not complete (summary.status interrupted)"),
            std::string::npos)
      << r.out;
}

TEST_F(compare_test, a_gate_changed_to_failing_is_listed_and_exits_1) {
  const auto x = normal_samples(12e-6, 0.01, 16);
  const auto pass = gates({{"oracle_fp64", true}, {"logits_finite", true}});
  const auto fail = gates({{"oracle_fp64", true}, {"logits_finite", false}});
  const auto base = write_run("base", {{workload(id_a, x, metric(), pass)}});
  const auto next = write_run("new", {{workload(id_a, x, metric(), fail)}});
  const auto c = compare(base, next);
  const auto& w = find(c, id_a);
  ASSERT_EQ(w.gate_changes.size(), 1u);
  EXPECT_EQ(w.gate_changes[0].name, "logits_finite");
  EXPECT_EQ(w.gate_changes[0].base_pass, true);
  EXPECT_EQ(w.gate_changes[0].new_pass, false);
  EXPECT_EQ(w.failing_gates_new, std::vector<std::string>{"logits_finite"});
  EXPECT_EQ(w.status, compare_status::same); // the time did not change; the gate did
  EXPECT_TRUE(c.fails());
  const auto r = run({"compare", base, next});
  EXPECT_EQ(r.rc, exit_code::failures);
  EXPECT_NE(r.out.find("logits_finite pass->FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 gate change; 1 workload failing gates in NEW -> FAIL"), std::string::npos)
      << r.out;
  // And back: listed as a change, nothing fails in NEW.
  const auto back = run({"compare", next, base});
  EXPECT_EQ(back.rc, exit_code::ok) << back.out;
  EXPECT_NE(back.out.find("logits_finite FAIL->pass"), std::string::npos) << back.out;
}

// A run whose SM clock fell 7.6% (1980 -> 1830 MHz, the clock watch's median) while its samples
// grew 10%: still SLOWER (the code can move the clock too), and listed with both clocks. A
// kernel timer's modal clock 0.8% apart (1980 -> 1965) and a record without clocks are not.
TEST_F(compare_test, a_moved_sm_clock_is_listed_beside_the_decision) {
  const auto x = normal_samples(12e-6, 0.01, 41), y = normal_samples(20e-6, 0.01, 42);
  auto watched = [](json rec, double mhz) {
    rec["extra"]["gpu_clocks"] = {{"readings", 12}, {"sm_mhz", {{"median", mhz}}}};
    return rec;
  };
  auto timed = [](json rec, double mhz) {
    rec["extra"]["timing"] = {{"modal_sm_mhz", mhz}};
    return rec;
  };
  const auto base = write_run("base", {{watched(workload(id_a, x), 1980),
                                        timed(workload(id_b, y), 1980), workload(id_c, y)}});
  const auto next = write_run("new", {{watched(workload(id_a, scaled(x, 1.10)), 1830),
                                       timed(workload(id_b, y), 1965), workload(id_c, y)}});
  const auto c = compare(base, next);
  EXPECT_EQ(find(c, id_a).status, compare_status::slower);
  ASSERT_TRUE(find(c, id_a).clock_shift());
  EXPECT_NEAR(*find(c, id_a).clock_shift(), 1830.0 / 1980.0 - 1.0, 1e-12);
  EXPECT_NEAR(*find(c, id_b).clock_shift(), 1965.0 / 1980.0 - 1.0, 1e-12);
  EXPECT_FALSE(find(c, id_c).clock_shift());
  EXPECT_EQ(c.clock_shift_count(), 1u);
  EXPECT_EQ(compare_summary(c)["clock_shifts"], 1);
  const auto r = run({"compare", base, next});
  EXPECT_EQ(r.rc, exit_code::failures);
  EXPECT_NE(r.out.find("SM clock moved by more than 2%"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(id_a + ": 1980 -> 1830 MHz (-7.6%), SLOWER"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(id_b + ": 1980"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 workload with the SM clock moved -> FAIL"), std::string::npos) << r.out;
}

TEST_F(compare_test, an_error_record_gives_no_data) {
  const auto x = normal_samples(12e-6, 0.01, 17);
  const auto base =
      write_run("base", {{workload(id_a, x), errored(id_b, "engine: out of memory")}});
  const auto next = write_run("new", {{errored(id_a, "kernel launch failed"), workload(id_b, x)}});
  const auto c = compare(base, next);
  const auto& a = find(c, id_a);
  EXPECT_EQ(a.status, compare_status::no_data);
  EXPECT_FALSE(a.ratio);
  EXPECT_EQ(a.why, "error in NEW: kernel launch failed");
  EXPECT_EQ(find(c, id_b).why, "error in BASE: engine: out of memory");
  // The error record's failed gate fails NEW.
  const auto r = run({"compare", base, next});
  EXPECT_EQ(r.rc, exit_code::failures);
  EXPECT_NE(r.out.find(id_a + ": NO_DATA, error in NEW: kernel launch failed"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("2 NO_DATA"), std::string::npos) << r.out;
}

TEST_F(compare_test, fewer_than_two_samples_or_a_changed_metric_gives_no_decision) {
  const auto x = normal_samples(12e-6, 0.01, 18);
  const auto base = write_run("base", {{workload(id_a, {12e-6}), workload(id_b, x)}});
  const auto next = write_run(
      "new", {{workload(id_a, x), workload(id_b, x, metric("kernel_seconds", "lower", "ms"))}});
  const auto c = compare(base, next);
  EXPECT_EQ(find(c, id_a).status, compare_status::no_data);
  EXPECT_EQ(find(c, id_a).why, "BASE has 1 sample (2 needed)");
  const auto& b = find(c, id_b);
  EXPECT_EQ(b.status, compare_status::incomparable);
  EXPECT_NE(b.why.find("metric differs"), std::string::npos) << b.why;
  EXPECT_EQ(run({"compare", base, next}).rc, exit_code::ok);
}

// ---- environments ------------------------------------------------------------------------------

TEST_F(compare_test, a_changed_environment_is_refused_naming_the_field_unless_allowed) {
  const auto x = normal_samples(12e-6, 0.01, 19);
  struct change {
    std::string field;
    std::function<void(run_spec&)> apply;
  };
  const std::vector<change> changes = {
      {"environment.gpu.name", [](run_spec& r) { r.environment["gpu"]["name"] = "NVIDIA H100"; }},
      {"environment.driver.nvml_driver_version",
       [](run_spec& r) { r.environment["driver"]["nvml_driver_version"] = "575.51.03"; }},
      {"environment.driver.cuda_driver_version",
       [](run_spec& r) { r.environment["driver"]["cuda_driver_version"] = 12090; }},
      {"config.clock_policy", [](run_spec& r) { r.config["clock_policy"] = "lock=1500"; }},
      {"environment.clocks.locked", [](run_spec& r) { r.environment["clocks"]["locked"] = true; }},
  };
  const auto base = write_run("base", {{workload(id_a, x)}});
  for (const auto& ch : changes) {
    run_spec changed{{workload(id_a, x)}};
    ch.apply(changed);
    const auto next = write_run("new-" + ch.field, changed);
    const auto r = run({"compare", base, next});
    EXPECT_EQ(r.rc, exit_code::bad_input) << ch.field << ": " << r.out;
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(ch.field), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    const auto allowed = run({"compare", base, next, "--allow-env-change"});
    EXPECT_EQ(allowed.rc, exit_code::ok) << ch.field << ": " << allowed.err;
    EXPECT_NE(allowed.out.find(
                  "environment differs (compared anyway: --allow-env-change) (1):\n  " + ch.field),
              std::string::npos)
        << allowed.out;
  }
  // Both values are named: BASE's and NEW's.
  run_spec h100{{workload(id_a, x)}};
  h100.environment["gpu"]["name"] = "NVIDIA H100";
  const auto r = run({"compare", base, write_run("h100", h100)});
  EXPECT_NE(r.err.find("environment.gpu.name \"NVIDIA H200\" vs \"NVIDIA H100\""),
            std::string::npos)
      << r.err;
}

TEST_F(compare_test, the_locked_clock_counts_only_when_both_runs_locked) {
  const auto x = normal_samples(12e-6, 0.01, 20);
  run_spec locked{{workload(id_a, x)}}, relocked{{workload(id_a, x)}};
  for (auto* r : {&locked, &relocked}) {
    r->environment["clocks"]["locked"] = true;
    r->config["clock_policy"] = "lock=1500";
  }
  locked.environment["clocks"]["sm_application_mhz"] = 1500;
  relocked.environment["clocks"]["sm_application_mhz"] = 1755;
  const auto a = load_suite_run(write_run("locked", locked), "BASE");
  const auto b = load_suite_run(write_run("relocked", relocked), "NEW");
  const auto diffs = environment_differences(a, b);
  ASSERT_EQ(diffs.size(), 1u);
  EXPECT_EQ(diffs[0].field, "environment.clocks.sm_application_mhz");
  EXPECT_EQ(diffs[0].base, 1500);
  EXPECT_EQ(diffs[0].next, 1755);
  // Unlocked, the application clock is not what the run ran at: not compared.
  run_spec free_a{{workload(id_a, x)}}, free_b{{workload(id_a, x)}};
  free_b.environment["clocks"]["sm_application_mhz"] = 1755;
  EXPECT_TRUE(environment_differences(load_suite_run(write_run("free-a", free_a), "BASE"),
                                      load_suite_run(write_run("free-b", free_b), "NEW"))
                  .empty());
}

TEST_F(compare_test, unavailable_or_absent_on_both_sides_is_not_a_difference) {
  const auto x = normal_samples(12e-6, 0.01, 21);
  run_spec a{{workload(id_a, x)}}, b{{workload(id_a, x)}};
  a.environment["driver"]["nvml_driver_version"] = "unavailable";
  b.environment["driver"].erase("nvml_driver_version");
  a.config.erase("clock_policy");
  b.config.erase("clock_policy");
  EXPECT_TRUE(environment_differences(load_suite_run(write_run("a", a), "BASE"),
                                      load_suite_run(write_run("b", b), "NEW"))
                  .empty());
}

// ---- bad input ---------------------------------------------------------------------------------

TEST_F(compare_test, bad_input_is_one_line_and_exit_2) {
  const auto good = write_run("good", {{workload(id_a, normal_samples(12e-6, 0.01, 22))}});
  const auto with_keys = [](const std::string& run, const std::vector<int>& keys) {
    json doc = json::parse(std::ifstream(fs::path(run) / "result.json"));
    doc["records"][0]["sample_keys"] = keys;
    return doc.dump();
  };
  const auto write = [&](const std::string& rel, const std::string& text) {
    const auto p = dir_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  };
  json fastp = {{"schema", "kernelgate.result/1"}, {"kind", "fastp"}, {"records", json::array()}};
  json dup = json::parse(std::ifstream(fs::path(good) / "result.json"));
  dup["records"].push_back(dup["records"][0]);
  json no_metric = json::parse(std::ifstream(fs::path(good) / "result.json"));
  no_metric["records"][0].erase("metric");
  fs::create_directories(dir_ / "empty");
  write("cut/records.jsonl", "{\"type\":\"suite_workload\"}\n");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {(dir_ / "nowhere").string(), "does not exist"},
      {write("bad/result.json", "{\"schema\": "), "bad/result.json"},
      {write("fastp/result.json", fastp.dump()), "is a 'fastp' result, not a suite run"},
      {(dir_ / "cut").string(), "has no result.json (the run did not finish); resume it first"},
      {(dir_ / "empty").string(), "is a folder without result.json"},
      {write("dup/result.json", dup.dump()), "the id appears twice (records 0 and 1)"},
      {write("nometric/result.json", no_metric.dump()), "no \"metric\" object"},
      {write("shortkeys/result.json", with_keys(good, {1})),
       "\"sample_keys\" is not an array as long as \"samples\""},
      {write("dupkeys/result.json", with_keys(good, std::vector<int>(30, 7))),
       "\"sample_keys\" names a key twice: 7"},
  };
  for (const auto& [path, says] : cases)
    for (const auto& args : {std::vector<std::string>{"compare", good, path},
                             std::vector<std::string>{"compare", path, good}}) {
      const auto r = run(args);
      EXPECT_EQ(r.rc, exit_code::bad_input) << path << ": " << r.out;
      EXPECT_EQ(lines(r.err), 1) << r.err;
      EXPECT_EQ(r.err.rfind("kernelgate: compare: ", 0), 0u) << r.err;
      EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
      EXPECT_NE(r.err.find(args[1] == good ? "NEW" : "BASE"), std::string::npos) << r.err;
    }
  for (const auto& bad : {"1", "-0.1", "nan", "x"}) {
    const auto r = run({"compare", good, good, "--min-effect", bad});
    EXPECT_EQ(r.rc, exit_code::bad_input) << bad;
    EXPECT_EQ(lines(r.err), 1) << r.err;
  }
  const auto one = run({"compare", good});
  EXPECT_EQ(one.rc, exit_code::bad_input);
  EXPECT_EQ(lines(one.err), 1) << one.err;
}

// ---- the result file ---------------------------------------------------------------------------

TEST_F(compare_test, out_writes_a_valid_reproducible_compare_result) {
  const auto x = normal_samples(12e-6, 0.01, 23);
  const auto base =
      write_run("base", {{workload(id_a, x), workload(id_b, x), errored(id_c, "could not build")}});
  const auto next = write_run("new", {{workload(id_a, scaled(x, 1.1)), workload(id_c, x)}});
  const auto out1 = (dir_ / "cmp1").string(), out2 = (dir_ / "cmp2").string();
  const auto r1 = run({"compare", base, next, "--out", out1});
  const auto r2 = run({"compare", base, next, "--out", out2});
  EXPECT_EQ(r1.rc, exit_code::failures) << r1.err;
  EXPECT_NE(r1.out.find("Wrote " + out1 + "/result.json"), std::string::npos) << r1.out;
  const auto v = run({"validate", out1 + "/result.json"});
  EXPECT_EQ(v.rc, exit_code::ok) << v.err;
  const auto doc1 = read_json_file_checked(out1 + "/result.json");
  const auto doc2 = read_json_file_checked(out2 + "/result.json");
  EXPECT_EQ(doc1["kind"], "compare");
  ASSERT_EQ(doc1["records"].size(), 3u);       // one per workload id of either run
  EXPECT_EQ(doc1["records"], doc2["records"]); // same inputs, same seeded intervals
  EXPECT_EQ(doc1["summary"], doc2["summary"]);
  EXPECT_EQ(doc1["records"][0]["workload"], id_c); // ordered by id
  EXPECT_EQ(doc1["records"][0]["decision"], "NO_DATA");
  EXPECT_EQ(doc1["records"][1]["decision"], "MISSING");
  EXPECT_EQ(doc1["records"][1]["missing_from"], "NEW");
  EXPECT_EQ(doc1["records"][2]["decision"], "SLOWER");
  EXPECT_EQ(doc1["summary"]["verdict"], "FAIL");
  EXPECT_EQ(doc1["config"]["base"]["sha256"].get<std::string>().size(), 64u);
  // The records were streamed to records.jsonl too.
  std::ifstream jsonl(out1 + "/records.jsonl");
  int n = 0;
  for (std::string line; std::getline(jsonl, line);)
    ++n;
  EXPECT_EQ(n, 3);
  // --json prints the same records and summary.
  const auto j = run({"compare", base, next, "--json"});
  const auto machine = json::parse(j.out);
  EXPECT_EQ(machine["records"], doc1["records"]);
  EXPECT_EQ(machine["summary"], doc1["summary"]);
}

TEST_F(compare_test, out_must_not_be_a_compared_runs_folder) {
  const auto x = normal_samples(12e-6, 0.01, 24);
  const auto base = write_run("base", {{workload(id_a, x)}});
  const auto next = write_run("new", {{workload(id_a, x)}});
  for (const auto& target : {base, next, next + "/."}) {
    const auto r = run({"compare", base, next + "/result.json", "--out", target});
    EXPECT_EQ(r.rc, exit_code::bad_input) << r.out;
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_TRUE(fs::exists(fs::path(base) / "result.json"));
    EXPECT_TRUE(fs::exists(fs::path(next) / "result.json"));
  }
}

// A small suite with one of everything: prints the text a person reads (docs/cli.md's example).
TEST_F(compare_test, prints_a_table_the_lists_and_one_summary_line) {
  const auto s = [](double mean, double cv, std::uint64_t seed) {
    return normal_samples(mean, cv, seed);
  };
  const auto tps = metric("tokens_per_second", "higher", "tokens/s");
  const auto decode_gates =
      gates({{"logits_finite", true}, {"logits_bit_identical_to_solo", true}});
  auto broken = decode_gates;
  broken[1]["pass"] = false;
  const auto base =
      write_run("base", {{workload("kernel.gemv.down.b1", s(11.8e-6, 0.01, 30)),
                          workload("kernel.gemv.lm_head.b8", s(121e-6, 0.01, 31)),
                          workload("kernel.attention.b32.ctx8192", s(412e-6, 0.01, 32)),
                          workload("kernel.argmax.b1", s(6.1e-6, 0.08, 33)),
                          workload("step.decode.colocated.b8.ctx2048", s(6.9e-3, 0.01, 34),
                                   metric("step_seconds"), decode_gates),
                          workload("serving.throughput.production.log512-8192.solo",
                                   s(5210, 0.01, 35), tps, gates({{"load_within_limit", true}})),
                          workload("training.lora.jobs1.solo", s(0.182, 0.01, 36),
                                   metric("step_seconds"), gates({{"losses_finite", true}}))}});
  const auto next =
      write_run("new", {{workload("kernel.gemv.down.b1", s(12.4e-6, 0.01, 40)),
                         workload("kernel.gemv.lm_head.b8", s(121e-6, 0.01, 41)),
                         workload("kernel.attention.b32.ctx8192", s(388e-6, 0.01, 42)),
                         workload("kernel.argmax.b1", s(6.2e-6, 0.08, 43)),
                         workload("step.decode.colocated.b8.ctx2048", s(6.9e-3, 0.01, 44),
                                  metric("step_seconds"), broken),
                         workload("serving.throughput.production.log512-8192.solo",
                                  s(5190, 0.01, 45), tps, gates({{"load_within_limit", true}}))}});
  const auto r = run({"compare", base, next});
  std::cout << r.out;
  EXPECT_EQ(r.rc, exit_code::failures);
  // One row per paired workload: id, metric, the medians, the ratio and its interval, decision.
  EXPECT_TRUE(std::regex_search(
      r.out,
      std::regex(R"(\nkernel\.gemv\.down\.b1 +\| +kernel_seconds \| +[0-9.]+ us \| +[0-9.]+ us )"
                 R"(\| +1\.0[0-9]{2} \[1\.0[0-9]{2}, 1\.0[0-9]{2}\] \| +SLOWER \|\n)")))
      << r.out;
  EXPECT_NE(r.out.find("logits_bit_identical_to_solo pass->FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("only in BASE, missing in NEW (1):\n  training.lora.jobs1.solo"),
            std::string::npos)
      << r.out;
  const auto last = r.out.substr(r.out.rfind("compare: "));
  EXPECT_EQ(lines(last), 1) << last;
  EXPECT_EQ(last.rfind("compare: 6 paired: 1 SLOWER, 1 FASTER, ", 0), 0u) << last;
}

// ---- no false alarms ---------------------------------------------------------------------------

// The CPU side of "runs of the same build do not cry wolf": pairs of runs drawn from one
// lognormal distribution at 2% CV, 30 samples each, decided as compare decides them. With the
// ratio's standard error near 1.25 x 2% x sqrt(2 / 30) = 0.65%, SLOWER needs the interval's
// lower end above 1.03, an estimate more than 6 standard errors off: it should (almost) never
// happen. 2000 resamples instead of 10,000 keep 1000 pairs at about a second.
TEST(compare_false_alarms, same_distribution_runs_are_rarely_called_faster_or_slower) {
  constexpr int pairs = 1000, n = 30;
  const double cv = 0.02, sigma = std::sqrt(std::log(1 + cv * cv));
  compare_options opt;
  opt.resamples = 2000;
  rng r(20261201, stream_id("false-alarms"));
  auto draw = [&] {
    std::vector<double> x(n);
    for (auto& v : x)
      v = 12e-6 * std::exp(sigma * r.normal());
    return x;
  };
  int slower = 0, faster = 0, ambiguous = 0, same = 0;
  for (int i = 0; i < pairs; ++i) {
    const auto base = draw(), next = draw();
    const auto d = decide_ratio(base, next, "lower", "pair." + std::to_string(i), opt);
    slower += d.verdict == decision::slower;
    faster += d.verdict == decision::faster;
    ambiguous += d.verdict == decision::ambiguous;
    same += d.verdict == decision::same;
  }
  const double rate = static_cast<double>(slower + faster) / pairs;
  std::cout << "false alarms over " << pairs << " same-distribution pairs (" << n
            << " samples, lognormal CV 2%, min effect 3%): " << slower << " SLOWER, " << faster
            << " FASTER (rate " << rate << "); " << same << " SAME, " << ambiguous
            << " AMBIGUOUS\n";
  ::testing::Test::RecordProperty("false_alarm_rate", std::to_string(rate));
  EXPECT_LT(rate, 0.01);
}

} // namespace

// Each run's fractions of solo (reports/colocation.h) beside each other: BASE's lora16 trace at
// half of solo's mean tokens/s, NEW's at three quarters; printed BASE -> NEW and kept in the
// summary of --json and --out.
TEST_F(compare_test, shows_each_runs_fraction_of_solo_before_and_after) {
  const json params = {{"request_mix", "production"}, {"tenant", "solo"}};
  auto make = [&](double co_factor, std::uint64_t seed) {
    auto solo = workload("serving.solo", normal_samples(400, 0.01, seed),
                         metric("tokens_per_second", "higher", "tokens/s"));
    solo["params"] = params;
    solo["kind"] = "serving_throughput";
    auto co = solo;
    co["id"] = "serving.lora16";
    co["params"]["tenant"] = "lora16";
    co["samples"] = scaled(solo["samples"].get<std::vector<double>>(), co_factor);
    return run_spec{{solo, co}};
  };
  const auto base = write_run("base", make(0.5, 31));
  const auto next = write_run("new", make(0.75, 32));
  const auto r = run({"compare", base, next});
  EXPECT_LE(r.rc, exit_code::failures) << r.err;
  EXPECT_NE(r.out.find("fractions of solo, BASE -> NEW"), std::string::npos) << r.out;
  // Each side's co-located samples are its solo samples scaled: the ratio of means is exact.
  EXPECT_NE(r.out.find("serving.lora16 (tokens_per_second, tenant lora16): 0.500 ["),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("] -> 0.750 ["), std::string::npos) << r.out;
  const auto j = json::parse(run({"compare", base, next, "--json"}).out);
  const auto& col = j["summary"]["colocation"];
  EXPECT_NEAR(col["base"]["pairs"][0]["fraction"].get<double>(), 0.5, 1e-12);
  EXPECT_NEAR(col["new"]["pairs"][0]["fraction"].get<double>(), 0.75, 1e-12);
  const auto out = (dir_ / "cmp").string();
  ASSERT_LE(run({"compare", base, next, "--out", out}).rc, exit_code::failures);
  const auto doc = json::parse(std::ifstream(fs::path(out) / "result.json"));
  EXPECT_EQ(doc["summary"]["colocation"], col);
}
