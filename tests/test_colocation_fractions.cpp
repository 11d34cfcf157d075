// A suite run's fractions of solo (reports/colocation.h) on hand-made records: which records pair,
// the fraction's direction for each kind of metric, the means worked out by hand here, the
// interval, and a reason for every workload beside others that gets no fraction.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "reports/colocation.h"

using namespace kg;
using nlohmann::json;

namespace {

json record(const std::string& id, const std::string& kind, json params, json samples,
            const std::string& direction = "higher",
            const std::string& metric = "tokens_per_second", const std::string& unit = "tokens/s") {
  return {{"type", "suite_workload"},
          {"id", id},
          {"level", "serving"},
          {"kind", kind},
          {"params", std::move(params)},
          {"metric", {{"name", metric}, {"direction", direction}, {"unit", unit}}},
          {"samples", std::move(samples)},
          {"gates", json::array()}};
}

json serving(const std::string& tenant, const std::string& band = "512-2048") {
  return {{"request_mix", "production"},
          {"context_band", band},
          {"tenant", tenant},
          {"itl_limit_ms", 50},
          {"output_tokens", 256}};
}

json step(const std::string& placement, int batch = 8) {
  return {{"batch", batch}, {"context", 2048}, {"placement", placement}};
}

std::string gap(const colocation_report& r, const std::string& id) {
  for (const auto& g : r.gaps)
    if (g.id == id) return g.reason;
  return "";
}

} // namespace

TEST(colocation_fractions, throughput_is_mean_beside_over_mean_solo) {
  // solo mean (400 + 500 + 600) / 3 = 500; lora16 mean (200 + 300 + 250) / 3 = 250: 0.5.
  const std::vector<json> recs = {
      record("s.lora16", "serving_throughput", serving("lora16"), {200, 300, 250}),
      record("s.solo", "serving_throughput", serving("solo"), {400, 500, 600})};
  const auto r = colocation_fractions(recs);
  ASSERT_EQ(r.pairs.size(), 1u);
  const auto& p = r.pairs[0];
  EXPECT_EQ(p.id, "s.lora16");
  EXPECT_EQ(p.solo_id, "s.solo");
  EXPECT_EQ(p.placement_key, "tenant");
  EXPECT_EQ(p.placement, "lora16");
  EXPECT_DOUBLE_EQ(p.mean, 250.0);
  EXPECT_DOUBLE_EQ(p.solo_mean, 500.0);
  EXPECT_DOUBLE_EQ(p.fraction, 0.5);
  ASSERT_TRUE(p.interval.has_value());
  EXPECT_DOUBLE_EQ(p.interval->estimate, 0.5);
  EXPECT_LE(p.interval->lo, 0.5);
  EXPECT_GE(p.interval->hi, 0.5);
  // The extremes of resampled means bound the interval: 200 / 600 and 300 / 400.
  EXPECT_GE(p.interval->lo, 200.0 / 600.0);
  EXPECT_LE(p.interval->hi, 300.0 / 400.0);
  EXPECT_TRUE(r.gaps.empty());
}

TEST(colocation_fractions, a_time_is_inverted_so_below_one_is_a_slowdown) {
  // Step seconds: solo mean 0.002, colocated mean (0.0025 + 0.0035) / 2 = 0.003: 2/3.
  const std::vector<json> recs = {
      record("st.solo", "decode_step", step("solo"), {0.002, 0.002}, "lower", "step_seconds", "s"),
      record("st.co", "decode_step", step("colocated"), {0.0025, 0.0035}, "lower", "step_seconds",
             "s")};
  const auto r = colocation_fractions(recs);
  ASSERT_EQ(r.pairs.size(), 1u);
  EXPECT_EQ(r.pairs[0].placement_key, "placement");
  EXPECT_DOUBLE_EQ(r.pairs[0].fraction, 0.002 / 0.003);
  EXPECT_LT(r.pairs[0].fraction, 1.0);
  ASSERT_TRUE(r.pairs[0].interval.has_value());
  // The solo side never varies: every resampled ratio lies between 0.002 / 0.0035 and 0.002 /
  // 0.0025.
  EXPECT_GE(r.pairs[0].interval->lo, 0.002 / 0.0035 - 1e-12);
  EXPECT_LE(r.pairs[0].interval->hi, 0.002 / 0.0025 + 1e-12);
}

TEST(colocation_fractions, twins_match_on_every_other_param_kind_and_metric) {
  const std::vector<json> recs = {
      // Twin of a.lora4 only: same band.
      record("a.solo", "serving_throughput", serving("solo", "512-2048"), {100, 100}),
      record("b.solo", "serving_throughput", serving("solo", "2048-8192"), {80, 80}),
      record("a.lora4", "serving_throughput", serving("lora4", "512-2048"), {50, 70}),
      // Another batch than any solo step: no twin.
      record("st.co.b4", "decode_step", step("colocated", 4), {1.0, 1.0}, "lower", "s", "s"),
      record("st.solo.b8", "decode_step", step("solo", 8), {1.0, 1.0}, "lower", "s", "s"),
      // Same params as a.solo but another kind: not its twin.
      record("p99.lora4", "serving_p99", serving("lora4", "512-2048"), {30, 40}, "lower",
             "p99_itl_ms", "ms"),
      // A kernel-level record names no placement: neither paired nor a gap.
      record("k.gemv", "gemv", {{"batch", 8}}, {1e-5, 1e-5}, "lower", "kernel_seconds", "s")};
  const auto r = colocation_fractions(recs);
  ASSERT_EQ(r.pairs.size(), 1u);
  EXPECT_EQ(r.pairs[0].id, "a.lora4");
  EXPECT_EQ(r.pairs[0].solo_id, "a.solo");
  EXPECT_DOUBLE_EQ(r.pairs[0].fraction, 0.6); // (50 + 70) / 2 / 100
  EXPECT_NE(gap(r, "st.co.b4").find("no solo twin"), std::string::npos);
  EXPECT_NE(gap(r, "p99.lora4").find("no solo twin"), std::string::npos);
  EXPECT_EQ(gap(r, "k.gemv"), "");
  EXPECT_EQ(r.gaps.size(), 2u);
}

TEST(colocation_fractions, what_cannot_be_measured_is_a_gap_with_its_reason) {
  auto errored = record("e.hog", "serving_throughput", serving("hog"), json::array());
  errored.erase("samples");
  errored["error"] = "no load met p99 ITL <= 50 ms";
  auto solo_err = record("f.solo", "serving_throughput", serving("solo", "log512-8192"), {1});
  solo_err.erase("samples");
  const std::vector<json> recs = {
      record("e.solo", "serving_throughput", serving("solo"), {100, 120}),
      errored,
      solo_err,
      record("f.lora1", "serving_throughput", serving("lora1", "log512-8192"), {10, 12}),
      record("z.solo", "serving_throughput", serving("solo", "2048-8192"), {0, 5}),
      record("z.lora1", "serving_throughput", serving("lora1", "2048-8192"), {10, 12}),
      json("not a record"),
      {{"type", "suite_workload"}, {"id", 7}}};
  const auto r = colocation_fractions(recs);
  EXPECT_TRUE(r.pairs.empty());
  EXPECT_NE(gap(r, "e.hog").find("no samples"), std::string::npos);
  EXPECT_NE(gap(r, "f.lora1").find("solo twin has no samples"), std::string::npos);
  EXPECT_NE(gap(r, "z.lora1").find("not positive"), std::string::npos);
  EXPECT_EQ(r.gaps.size(), 3u);
}

TEST(colocation_fractions, one_sample_a_side_gives_the_fraction_without_an_interval) {
  const std::vector<json> recs = {
      record("t.beside", "lora_training", {{"jobs", 16}, {"placement", "beside_decode"}}, {6.0},
             "lower", "step_seconds", "s"),
      record("t.solo", "lora_training", {{"jobs", 16}, {"placement", "solo"}}, {4.5}, "lower",
             "step_seconds", "s")};
  const auto r = colocation_fractions(recs);
  ASSERT_EQ(r.pairs.size(), 1u);
  EXPECT_DOUBLE_EQ(r.pairs[0].fraction, 0.75);
  EXPECT_FALSE(r.pairs[0].interval.has_value());
  const auto j = to_json(r);
  EXPECT_TRUE(j["pairs"][0]["ci95"].is_null());
  EXPECT_EQ(j["pairs"][0]["solo_id"], "t.solo");
  EXPECT_NE(colocation_text(r).find("no interval"), std::string::npos);
}

TEST(colocation_fractions, json_and_text_carry_each_pair_and_gap) {
  const std::vector<json> recs = {
      record("s.partition", "serving_throughput", serving("partition"), {60, 80}),
      record("s.solo", "serving_throughput", serving("solo"), {100, 100}),
      record("s.hog", "serving_throughput", serving("hog", "2048-8192"), {60, 80})};
  const auto r = colocation_fractions(recs);
  const auto j = to_json(r);
  ASSERT_EQ(j["pairs"].size(), 1u);
  EXPECT_DOUBLE_EQ(j["pairs"][0]["fraction"].get<double>(), 0.7);
  EXPECT_EQ(j["pairs"][0]["ci95"].size(), 2u);
  ASSERT_EQ(j["gaps"].size(), 1u);
  EXPECT_EQ(j["gaps"][0]["id"], "s.hog");
  const auto text = colocation_text(r);
  EXPECT_NE(text.find("0.700 ["), std::string::npos);
  EXPECT_NE(text.find("s.partition"), std::string::npos);
  EXPECT_NE(text.find("no fraction  s.hog"), std::string::npos);
  EXPECT_EQ(colocation_text(colocation_fractions({})), "");
}
