// Input regimes of the strict protocol (workloads/input_regimes.h): each regime's distribution
// checked against hand-computed expectations, parsing and its errors, and the catalog's regime
// lists loaded through the real task loader.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include <unistd.h>

#include <gtest/gtest.h>

#include "reports/remove_tree.h"
#include "suite/task_catalog.h"
#include "workloads/input_regimes.h"
#include "base/rng.h"
#include "workloads/task.h"

using namespace kg;
namespace fs = std::filesystem;

namespace {

regime_spec spec_of(regime_kind k) {
  regime_spec s;
  s.kind = k;
  return s;
}

host_tensor filled(dtype t, std::vector<std::int64_t> shape, const regime_spec& spec,
                   std::uint64_t seed = 11) {
  host_tensor x(t, std::move(shape));
  rng r(seed, stream_id("activation"));
  fill_activation(x, spec, r);
  return x;
}

struct row_stats {
  double mean, sd;
};

// Mean and sample standard deviation of row `row` (two passes, in double).
row_stats stats_of_row(const host_tensor& x, std::int64_t row) {
  const std::int64_t cols = x.shape.back();
  double s = 0;
  for (std::int64_t c = 0; c < cols; ++c)
    s += x.at(row * cols + c);
  const double mean = s / static_cast<double>(cols);
  double ss = 0;
  for (std::int64_t c = 0; c < cols; ++c)
    ss += (x.at(row * cols + c) - mean) * (x.at(row * cols + c) - mean);
  return {mean, std::sqrt(ss / static_cast<double>(cols - 1))};
}

std::vector<double> row_values(const host_tensor& x, std::int64_t row) {
  const std::int64_t cols = x.shape.back();
  std::vector<double> v(static_cast<std::size_t>(cols));
  for (std::int64_t c = 0; c < cols; ++c)
    v[static_cast<std::size_t>(c)] = x.at(row * cols + c);
  return v;
}

std::int64_t first_index_of(const std::vector<double>& v, double value) {
  return std::find(v.begin(), v.end(), value) - v.begin();
}

} // namespace

TEST(input_regimes, names_round_trip_and_the_default_list_starts_with_normal) {
  const auto all = default_regimes();
  ASSERT_EQ(all.size(), 7u);
  EXPECT_EQ(all.front().kind, regime_kind::normal);
  const std::vector<std::string> names = {"normal", "scaled",       "shifted", "low_variance",
                                          "ties",   "tail_extreme", "special"};
  for (std::size_t k = 0; k < all.size(); ++k) {
    EXPECT_EQ(all[k].name(), names[k]);
    EXPECT_EQ(parse_regime_kind(names[k]), all[k].kind);
    EXPECT_TRUE(all[k].tolerance.empty());
  }
  EXPECT_FALSE(parse_regime_kind("Normal").has_value());
  EXPECT_FALSE(parse_regime_kind("").has_value());
}

TEST(input_regimes, normal_is_the_default_draw_bit_for_bit) {
  // The same stream drawn by r.normal() in element order: the bytes the activation role gets
  // without a regime, so strict draw 0 reproduces every earlier result.
  const auto x = filled(dtype::float32, {200, 1001}, spec_of(regime_kind::normal), 5);
  host_tensor y(dtype::float32, {200, 1001});
  rng r(5, stream_id("activation"));
  for (std::int64_t k = 0; k < y.numel(); ++k)
    y.set(k, r.normal());
  EXPECT_EQ(x.bytes, y.bytes);
  // n = 200200: the mean's standard error is 1/sqrt(n) = 2.2e-3, the sd's about 1.6e-3.
  double s = 0, s2 = 0;
  for (std::int64_t k = 0; k < x.numel(); ++k) {
    s += x.at(k);
    s2 += x.at(k) * x.at(k);
  }
  const double n = static_cast<double>(x.numel()), mean = s / n;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(s2 / n - mean * mean), 1.0, 0.01);
}

TEST(input_regimes, scaled_rows_cycle_through_every_exponent) {
  // 12 rows, exponents -3..2 (6 of them): rows 0-5 take each exponent once in a random order,
  // rows 6-11 repeat that order. A row's sample sd over 4000 N(0,1) values is 10^k within ~1%
  // (standard error 1/sqrt(2 x 4000)), so log10(sd) lies within 0.02 of the integer k.
  const auto x = filled(dtype::float32, {12, 4000}, spec_of(regime_kind::scaled));
  std::vector<int> k(12);
  double largest = 0;
  for (std::int64_t row = 0; row < 12; ++row) {
    const double l = std::log10(stats_of_row(x, row).sd);
    k[static_cast<std::size_t>(row)] = static_cast<int>(std::lround(l));
    EXPECT_NEAR(l, k[static_cast<std::size_t>(row)], 0.02) << "row " << row;
    for (std::int64_t c = 0; c < 4000; ++c)
      largest = std::max(largest, std::fabs(x.at(row * 4000 + c)));
  }
  EXPECT_EQ(std::set<int>(k.begin(), k.begin() + 6), (std::set<int>{-3, -2, -1, 0, 1, 2}));
  for (std::size_t row = 6; row < 12; ++row)
    EXPECT_EQ(k[row], k[row - 6]) << "row " << row;
  // The 10^2 rows reach the hundreds (the max of 8000 |N(0,1)| is ~4, never above 6 here).
  EXPECT_GT(largest, 200.0);
  EXPECT_LT(largest, 600.0);
  // The order is drawn: another seed gives another permutation (checked for these seeds).
  const auto y = filled(dtype::float32, {6, 4000}, spec_of(regime_kind::scaled), 12);
  std::vector<int> ky;
  for (std::int64_t row = 0; row < 6; ++row)
    ky.push_back(static_cast<int>(std::lround(std::log10(stats_of_row(y, row).sd))));
  EXPECT_NE(ky, std::vector<int>(k.begin(), k.begin() + 6));
  // A narrower range: every row's exponent in [-1, 1].
  auto narrow = spec_of(regime_kind::scaled);
  narrow.min_exp = -1;
  narrow.max_exp = 1;
  const auto z = filled(dtype::bfloat16, {9, 2000}, narrow);
  std::set<int> kz;
  for (std::int64_t row = 0; row < 9; ++row)
    kz.insert(static_cast<int>(std::lround(std::log10(stats_of_row(z, row).sd))));
  EXPECT_EQ(kz, (std::set<int>{-1, 0, 1}));
}

TEST(input_regimes, a_vector_takes_one_scale_per_span_of_1024) {
  // The operand of an elementwise task is one row: cut into spans of 1024 elements (the last one
  // shorter), a single draw still reaches every exponent. 6 x 1024 + 100 elements: spans 0-5 take
  // each of the 6 exponents once, the 100-element span repeats span 0's.
  const std::int64_t n = 6 * 1024 + 100;
  const auto x = filled(dtype::float32, {n}, spec_of(regime_kind::scaled));
  const auto sd_of = [&](std::int64_t begin, std::int64_t len) {
    double ss = 0;
    for (std::int64_t k = begin; k < begin + len; ++k)
      ss += x.at(k) * x.at(k);
    return std::sqrt(ss / static_cast<double>(len));
  };
  std::set<long> k;
  for (std::int64_t span = 0; span < 6; ++span) {
    const double l = std::log10(sd_of(span * 1024, 1024));
    EXPECT_NEAR(l, std::lround(l), 0.03) << "span " << span; // SE of the sd: 2.2%
    k.insert(std::lround(l));
  }
  EXPECT_EQ(k, (std::set<long>{-3, -2, -1, 0, 1, 2}));
  EXPECT_EQ(std::lround(std::log10(sd_of(6 * 1024, 100))), std::lround(std::log10(sd_of(0, 1024))));
}

TEST(input_regimes, shifted_rows_sit_on_their_shift_with_unit_spread) {
  // C = 2000: a row's mean lies within 4 / sqrt(C) = 0.09 of its shift, its sd within 8% of 1.
  const double slack = 4 / std::sqrt(2000.0);
  const auto x = filled(dtype::float32, {64, 2000}, spec_of(regime_kind::shifted));
  int negative = 0, below_100 = 0;
  for (std::int64_t row = 0; row < 64; ++row) {
    const auto st = stats_of_row(x, row);
    EXPECT_GE(std::fabs(st.mean), 10 - slack) << "row " << row;
    EXPECT_LE(std::fabs(st.mean), 1000 + slack) << "row " << row;
    EXPECT_NEAR(st.sd, 1.0, 0.08) << "row " << row;
    negative += st.mean < 0;
    below_100 += std::fabs(st.mean) < 100;
  }
  // Random signs, and |s| log-uniform: half the rows below 100 on average (binomial(64, 1/2)).
  EXPECT_GT(negative, 16);
  EXPECT_LT(negative, 48);
  EXPECT_GT(below_100, 16);
  EXPECT_LT(below_100, 48);
  // min_shift == max_shift: the shift is known, +-50 exactly.
  auto fixed = spec_of(regime_kind::shifted);
  fixed.min_shift = fixed.max_shift = 50;
  const auto y = filled(dtype::float32, {16, 2000}, fixed);
  for (std::int64_t row = 0; row < 16; ++row)
    EXPECT_NEAR(std::fabs(stats_of_row(y, row).mean), 50.0, slack) << "row " << row;
}

TEST(input_regimes, low_variance_rows_have_a_relative_sd_of_one_in_a_thousand) {
  // C = 4000: the sample sd is within ~1.1% (one standard error) of relative_sd |m|; 5% is over 4
  // standard errors. The mean is within 4 relative_sd |m| / sqrt(C) of m, |m| in [1, 10].
  const auto x = filled(dtype::float32, {48, 4000}, spec_of(regime_kind::low_variance));
  int negative = 0;
  for (std::int64_t row = 0; row < 48; ++row) {
    const auto st = stats_of_row(x, row);
    EXPECT_GE(std::fabs(st.mean), 1 - 1e-4) << "row " << row;
    EXPECT_LE(std::fabs(st.mean), 10 + 1e-3) << "row " << row;
    EXPECT_NEAR(st.sd / std::fabs(st.mean), 1e-3, 0.05e-3) << "row " << row;
    negative += st.mean < 0;
  }
  EXPECT_GT(negative, 12);
  EXPECT_LT(negative, 36);
  auto wider = spec_of(regime_kind::low_variance);
  wider.relative_sd = 0.05;
  const auto y = filled(dtype::float32, {8, 4000}, wider);
  for (std::int64_t row = 0; row < 8; ++row) {
    const auto st = stats_of_row(y, row);
    EXPECT_NEAR(st.sd / std::fabs(st.mean), 0.05, 0.05 * 0.05) << "row " << row;
  }
}

TEST(input_regimes, ties_copy_each_rows_extremes_to_a_second_position) {
  // ties is the normal draw with two elements per row overwritten: the maximum's value at a second
  // position, the minimum's at a third. The copy lands before the original in some rows (the
  // first occurrence is then the copy, which an argmax must return) and after it in others.
  const std::int64_t rows = 64, cols = 1001;
  const auto x = filled(dtype::float32, {rows, cols}, spec_of(regime_kind::ties));
  const auto n = filled(dtype::float32, {rows, cols}, spec_of(regime_kind::normal));
  int max_copy_before = 0, min_copy_before = 0;
  for (std::int64_t row = 0; row < rows; ++row) {
    const auto v = row_values(x, row), orig = row_values(n, row);
    const double hi = *std::max_element(orig.begin(), orig.end());
    const double lo = *std::min_element(orig.begin(), orig.end());
    EXPECT_EQ(*std::max_element(v.begin(), v.end()), hi) << "row " << row;
    EXPECT_EQ(*std::min_element(v.begin(), v.end()), lo) << "row " << row;
    EXPECT_EQ(std::count(v.begin(), v.end(), hi), 2) << "row " << row;
    EXPECT_EQ(std::count(v.begin(), v.end(), lo), 2) << "row " << row;
    int changed = 0;
    for (std::int64_t c = 0; c < cols; ++c)
      changed += v[static_cast<std::size_t>(c)] != orig[static_cast<std::size_t>(c)];
    EXPECT_EQ(changed, 2) << "row " << row;
    max_copy_before += first_index_of(v, hi) < first_index_of(orig, hi);
    min_copy_before += first_index_of(v, lo) < first_index_of(orig, lo);
  }
  EXPECT_GT(max_copy_before, 0);
  EXPECT_LT(max_copy_before, rows);
  EXPECT_GT(min_copy_before, 0);
  EXPECT_LT(min_copy_before, rows);
  // Rows too short for both ties: 3 elements keep the maximum's tie; 2 become the maximum twice.
  const auto three = filled(dtype::float32, {20, 3}, spec_of(regime_kind::ties));
  for (std::int64_t row = 0; row < 20; ++row) {
    const auto v = row_values(three, row);
    EXPECT_EQ(std::count(v.begin(), v.end(), *std::max_element(v.begin(), v.end())), 2);
  }
  const auto two = filled(dtype::bfloat16, {20, 2}, spec_of(regime_kind::ties));
  for (std::int64_t row = 0; row < 20; ++row)
    EXPECT_EQ(two.at(2 * row), two.at(2 * row + 1));
}

TEST(input_regimes, tail_extreme_puts_the_row_extremes_in_the_partial_tail) {
  // cols 1001: tail [992, 1001), both extremes there at distinct positions, in every row.
  const auto x = filled(dtype::float32, {40, 1001}, spec_of(regime_kind::tail_extreme));
  const auto n = filled(dtype::float32, {40, 1001}, spec_of(regime_kind::normal));
  for (std::int64_t row = 0; row < 40; ++row) {
    auto v = row_values(x, row), orig = row_values(n, row);
    const auto hi = std::max_element(v.begin(), v.end()) - v.begin();
    const auto lo = std::min_element(v.begin(), v.end()) - v.begin();
    EXPECT_GE(hi, 992) << "row " << row;
    EXPECT_GE(lo, 992) << "row " << row;
    EXPECT_NE(hi, lo);
    // Only swaps: the row holds the same values.
    std::sort(v.begin(), v.end());
    std::sort(orig.begin(), orig.end());
    EXPECT_EQ(v, orig) << "row " << row;
  }
  // A one-element tail (cols 4097: [4096, 4097); cols 1024: the last element) holds the maximum
  // on even rows and the minimum on odd rows.
  for (const std::int64_t cols : {std::int64_t{4097}, std::int64_t{1024}}) {
    const auto y = filled(dtype::float32, {10, cols}, spec_of(regime_kind::tail_extreme));
    for (std::int64_t row = 0; row < 10; ++row) {
      const auto v = row_values(y, row);
      const double want = row % 2 == 0 ? *std::max_element(v.begin(), v.end())
                                       : *std::min_element(v.begin(), v.end());
      EXPECT_EQ(v.back(), want) << cols << " row " << row;
    }
  }
}

TEST(input_regimes, special_mixes_signed_zeros_and_subnormals_into_one_element_in_eight) {
  // Per element: 1/8 replaced, a quarter each of +0, -0 and a subnormal of either sign: expected
  // 1/32 of n each of +0 and -0, 1/16 subnormal. n = 10^6: every count is within 3% of that (the
  // binomial standard error of n/32 is 0.56%).
  const auto x = filled(dtype::float32, {1000, 1000}, spec_of(regime_kind::special));
  const double n = static_cast<double>(x.numel());
  double plus_zero = 0, minus_zero = 0, subnormal = 0, negative_subnormal = 0;
  for (std::int64_t k = 0; k < x.numel(); ++k) {
    const auto v = static_cast<float>(x.at(k));
    if (v == 0) {
      (std::signbit(v) ? minus_zero : plus_zero) += 1;
    }
    if (std::fpclassify(v) == FP_SUBNORMAL) {
      subnormal += 1;
      negative_subnormal += v < 0;
      EXPECT_LE(std::fabs(v), std::ldexp(1.0f, -129)); // k 2^-149 with k <= 2^20
    }
  }
  EXPECT_NEAR(plus_zero / n, 1.0 / 32, 0.03 / 32);
  EXPECT_NEAR(minus_zero / n, 1.0 / 32, 0.03 / 32);
  EXPECT_NEAR(subnormal / n, 1.0 / 16, 0.03 / 16);
  EXPECT_NEAR(negative_subnormal / subnormal, 0.5, 0.02);
  // bfloat16 shares float32's exponent: its values stay subnormal (never flushed to zero here,
  // so zeros are still 1/16 in all).
  const auto b = filled(dtype::bfloat16, {200, 1000}, spec_of(regime_kind::special));
  double b_sub = 0, b_zero = 0;
  for (std::int64_t k = 0; k < b.numel(); ++k) {
    const auto v = static_cast<float>(b.at(k));
    b_sub += std::fpclassify(v) == FP_SUBNORMAL;
    b_zero += v == 0;
  }
  EXPECT_NEAR(b_sub / static_cast<double>(b.numel()), 1.0 / 16, 0.1 / 16);
  EXPECT_NEAR(b_zero / static_cast<double>(b.numel()), 1.0 / 16, 0.1 / 16);
  // float16 subnormals: nonzero and below its smallest normal, 2^-14.
  const auto h = filled(dtype::float16, {200, 1000}, spec_of(regime_kind::special));
  double h_sub = 0;
  for (std::int64_t k = 0; k < h.numel(); ++k)
    h_sub += h.at(k) != 0 && std::fabs(h.at(k)) < std::ldexp(1.0, -14);
  EXPECT_NEAR(h_sub / static_cast<double>(h.numel()), 1.0 / 16, 0.1 / 16);
}

TEST(input_regimes, every_regime_is_deterministic_in_its_seed) {
  for (const auto& spec : default_regimes()) {
    const auto a = filled(dtype::bfloat16, {17, 333}, spec, 3);
    const auto b = filled(dtype::bfloat16, {17, 333}, spec, 3);
    const auto c = filled(dtype::bfloat16, {17, 333}, spec, 4);
    EXPECT_EQ(a.bytes, b.bytes) << spec.name();
    EXPECT_NE(a.bytes, c.bytes) << spec.name();
  }
  host_tensor ints(dtype::int32, {4});
  rng r(1, 2);
  EXPECT_THROW(fill_activation(ints, spec_of(regime_kind::normal), r), std::invalid_argument);
}

TEST(input_regimes, partial_tail_by_hand) {
  using tail = std::pair<std::int64_t, std::int64_t>;
  EXPECT_EQ(partial_tail(1001), (tail{992, 1001})); // 1001 = 31 x 32 + 9
  EXPECT_EQ(partial_tail(4097), (tail{4096, 4097}));
  EXPECT_EQ(partial_tail(1024), (tail{1023, 1024})); // no partial block: the last element
  EXPECT_EQ(partial_tail(32), (tail{31, 32}));
  EXPECT_EQ(partial_tail(33), (tail{32, 33}));
  EXPECT_EQ(partial_tail(69), (tail{64, 69}));
  EXPECT_EQ(partial_tail(31), (tail{0, 31})); // shorter than a block: the whole row
  EXPECT_EQ(partial_tail(1), (tail{0, 1}));
  EXPECT_EQ(partial_tail(0), (tail{0, 0}));
}

TEST(input_regimes, parse_regime_reads_names_and_objects) {
  EXPECT_EQ(parse_regime("ties").kind, regime_kind::ties);
  const auto s = parse_regime(nlohmann::json::parse(
      R"({"name": "scaled", "min_exp": -1, "max_exp": 1,
          "tolerance": {"bfloat16": {"atol": 0.01, "rtol": 0.02}}})"));
  EXPECT_EQ(s.kind, regime_kind::scaled);
  EXPECT_EQ(s.min_exp, -1);
  EXPECT_EQ(s.max_exp, 1);
  ASSERT_EQ(s.tolerance.count(dtype::bfloat16), 1u);
  EXPECT_EQ(s.tolerance.at(dtype::bfloat16).atol, 0.01);
  EXPECT_EQ(s.tolerance.at(dtype::bfloat16).rtol, 0.02);
  const auto sh = parse_regime(nlohmann::json::parse(R"({"name": "shifted", "max_shift": 30})"));
  EXPECT_EQ(sh.min_shift, 10); // the default
  EXPECT_EQ(sh.max_shift, 30);
  EXPECT_EQ(parse_regime(nlohmann::json::parse(R"({"name": "low_variance", "relative_sd": 0.05})"))
                .relative_sd,
            0.05);
}

TEST(input_regimes, parse_regime_errors_name_the_problem) {
  const auto error_of = [](const char* text) -> std::string {
    try {
      (void)parse_regime(nlohmann::json::parse(text));
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  const auto expect_error = [&](const char* text, const std::string& part) {
    const auto e = error_of(text);
    EXPECT_NE(e.find(part), std::string::npos) << text << " -> '" << e << "'";
  };
  expect_error(R"("gaussian")", "unknown regime 'gaussian'");
  expect_error(R"({"name": "scaled", "min_exp": 3, "max_exp": 1})", "min_exp 3 > max_exp 1");
  expect_error(R"({"name": "scaled", "exponent": 3})", "takes no parameter 'exponent'");
  expect_error(R"({"name": "ties", "min_exp": 0})", "'ties' takes no parameter 'min_exp'");
  expect_error(R"({"name": "scaled", "max_exp": 1.5})", "'max_exp' must be an integer");
  expect_error(R"({"name": "scaled", "max_exp": 23})", "outside [-22, 22]");
  expect_error(R"({"name": "shifted", "min_shift": 0})", "'min_shift' must be positive");
  expect_error(R"({"name": "shifted", "min_shift": 100, "max_shift": 10})", "min_shift 100 >");
  expect_error(R"({"name": "low_variance", "relative_sd": -1})", "'relative_sd' must be positive");
  expect_error(R"({"min_exp": 1})", "needs a string \"name\"");
  expect_error(R"(3)", "a name or an object");
  expect_error(R"({"name": "ties", "tolerance": {"int32": {"atol": 0, "rtol": 0}}})",
               "not a floating dtype");
  expect_error(R"({"name": "ties", "tolerance": {"float32": {"atol": 0}}})",
               "exactly {\"atol\", \"rtol\"}");
}

TEST(input_regimes, to_json_round_trips) {
  auto specs = default_regimes();
  auto custom = spec_of(regime_kind::shifted);
  custom.min_shift = 2.5;
  custom.max_shift = 30;
  custom.tolerance[dtype::float32] = {1.5e-45, 1.2e-7};
  specs.push_back(custom);
  for (const auto& s : specs) {
    const auto back = parse_regime(s.to_json());
    EXPECT_EQ(back.kind, s.kind);
    EXPECT_EQ(back.min_exp, s.min_exp);
    EXPECT_EQ(back.max_exp, s.max_exp);
    EXPECT_EQ(back.min_shift, s.min_shift);
    EXPECT_EQ(back.max_shift, s.max_shift);
    EXPECT_EQ(back.relative_sd, s.relative_sd);
    ASSERT_EQ(back.tolerance.size(), s.tolerance.size());
    for (const auto& [t, tol] : s.tolerance) {
      EXPECT_EQ(back.tolerance.at(t).atol, tol.atol);
      EXPECT_EQ(back.tolerance.at(t).rtol, tol.rtol);
    }
  }
  // Only the kind's own parameters are written.
  EXPECT_EQ(spec_of(regime_kind::scaled).to_json(),
            nlohmann::json::parse(R"({"name": "scaled", "min_exp": -3, "max_exp": 2})"));
  EXPECT_EQ(spec_of(regime_kind::ties).to_json(), nlohmann::json::parse(R"({"name": "ties"})"));
}

namespace {

// A task of every input role, small enough to compare byte for byte.
task_def mixed_task() {
  task_def t;
  t.id = "mixed";
  t.inputs = {{"x", dtype::float32, "activation", "", {"R", "C"}},
              {"h", dtype::bfloat16, "activation", "", {"R", "C"}},
              {"w", dtype::float32, "weight", "", {"C"}},
              {"b", dtype::float32, "bias", "", {"C"}},
              {"m", dtype::float32, "matrix", "", {"C", "C"}},
              {"i", dtype::int64, "indices", "R", {"R"}},
              {"k", dtype::int32, "mask", "", {"R"}},
              {"u", dtype::float32, "uniform01", "", {"C"}},
              {"p", dtype::float32, "positive", "", {"C"}},
              {"n", dtype::int32, "activation", "", {"C"}}};
  t.shapes = {{"s", {{"R", 7}, {"C", 45}}}};
  return t;
}

} // namespace

TEST(input_regimes, strict_regime_zero_gives_the_default_bytes) {
  const auto t = mixed_task();
  ASSERT_EQ(t.regimes.size(), 7u); // a task_def made in code gets the seven defaults
  const auto plain = make_task_inputs(t, t.shapes[0], 99);
  task_input_regime strict;
  strict.strict_regime = 0;
  const auto zero = make_task_inputs(t, t.shapes[0], 99, strict);
  ASSERT_EQ(plain.size(), zero.size());
  for (std::size_t k = 0; k < plain.size(); ++k)
    EXPECT_EQ(plain[k].bytes, zero[k].bytes) << t.inputs[k].name;
  // Another regime changes the floating activations only.
  strict.strict_regime = 2; // shifted
  const auto shifted = make_task_inputs(t, t.shapes[0], 99, strict);
  for (std::size_t k = 0; k < plain.size(); ++k) {
    const bool floating_activation = k < 2;
    EXPECT_EQ(plain[k].bytes != shifted[k].bytes, floating_activation) << t.inputs[k].name;
  }
  EXPECT_GE(std::fabs(shifted[0].at(0)), 5.0);
  // An index outside the task's list, or a peer regime mixed in, is refused.
  strict.strict_regime = 7;
  EXPECT_THROW((void)make_task_inputs(t, t.shapes[0], 99, strict), std::out_of_range);
  strict.strict_regime = 0;
  strict.scale = 3;
  EXPECT_THROW((void)make_task_inputs(t, t.shapes[0], 99, strict), std::invalid_argument);
}

TEST(input_regimes, strict_regime_zero_matches_the_default_on_a_catalog_task) {
  const auto t = load_task(fs::path(KG_SOURCE_DIR) / "data/tasks/layernorm_affine_fp32.json");
  const auto& shape = t.shapes.back(); // tail: 37 x 1531
  task_input_regime strict;
  strict.strict_regime = 0;
  const auto a = make_task_inputs(t, shape, 20261129);
  const auto b = make_task_inputs(t, shape, 20261129, strict);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t k = 0; k < a.size(); ++k)
    EXPECT_EQ(a[k].bytes, b[k].bytes) << t.inputs[k].name;
}

TEST(input_regimes, every_catalog_task_lists_its_regimes_normal_first) {
  const auto tasks = load_tasks(std::string(KG_SOURCE_DIR) + "/data/tasks");
  ASSERT_GE(tasks.size(), 44u);
  // Ops whose float32 overflow a regime must be able to reach: a softmax without its max
  // subtraction or a softplus without its threshold overflows once inputs reach the hundreds.
  const std::set<std::string> exp_like = {"softmax",       "log_softmax",
                                          "cross_entropy", "softmax_cross_entropy",
                                          "softplus",      "masked_scaled_softmax"};
  for (const auto& t : tasks) {
    ASSERT_FALSE(t.regimes.empty()) << t.id;
    EXPECT_EQ(t.regimes.front().kind, regime_kind::normal) << t.id;
    std::set<std::string> names;
    for (const auto& r : t.regimes)
      EXPECT_TRUE(names.insert(r.name()).second) << t.id << " repeats " << r.name();
    for (const auto& r : t.regimes) {
      if (r.kind != regime_kind::scaled) continue;
      // exp(x) overflows float32 above ~88.7; |x| reaches ~5.5 x 10^max_exp.
      if (t.op == "exp") {
        EXPECT_LT(5.5 * std::pow(10.0, r.max_exp), 88.7) << t.id;
      }
      if (exp_like.count(t.op)) {
        EXPECT_GE(r.max_exp, 2) << t.id;
      }
    }
    if (t.op == "exp") {
      EXPECT_FALSE(names.count("shifted")) << t.id << ": exp(1000) overflows";
    }
  }
}

namespace {

// Task files written to a directory of this process's own, removed at the end of each test.
class regime_files : public ::testing::Test {
protected:
  fs::path dir = fs::temp_directory_path() / ("kg-regime-test-" + std::to_string(::getpid()));
  void TearDown() override { remove_tree(dir); }

  std::string error_of(const std::string& regimes) {
    fs::create_directories(dir);
    const fs::path f = dir / "t.json";
    std::ofstream(f) << R"json({
  "id": "t", "title": "a task", "kind": "single", "op": "relu", "reference": "torch.relu(x)",
  "inputs": [{"name": "x", "dtype": "float32", "role": "activation", "shape": ["R", "C"]}],
  "outputs": [{"name": "y", "dtype": "float32", "shape": ["R", "C"]}],
  "shapes": [{"name": "a", "dims": {"R": 4, "C": 8}}, {"name": "b", "dims": {"R": 3, "C": 5}}],
  "flops": "R*C", "min_bytes": "8*R*C",
  "tolerance": {"float32": {"atol": 0, "rtol": 0}}, "library_calls": "forbidden",
  "regimes": )json" + regimes +
                            "}";
    try {
      const auto t = load_task(f);
      EXPECT_GE(t.regimes.size(), 1u);
    } catch (const task_error& e) {
      return e.what();
    }
    return "";
  }
};

} // namespace

TEST_F(regime_files, the_loader_reads_regimes_and_rejects_bad_lists) {
  EXPECT_EQ(error_of(R"(["normal", {"name": "scaled", "max_exp": 1}, "ties"])"), "");
  auto e = error_of(R"(["ties", "normal"])");
  EXPECT_NE(e.find("/regimes/0"), std::string::npos) << e;
  EXPECT_NE(e.find("first regime must be 'normal'"), std::string::npos) << e;
  e = error_of(R"(["normal", {"name": "scaled", "min_exp": 2, "max_exp": 1}])");
  EXPECT_NE(e.find("/regimes/1"), std::string::npos) << e;
  EXPECT_NE(e.find("min_exp 2 > max_exp 1"), std::string::npos) << e;
  e = error_of(R"(["normal", "gaussian"])"); // the schema's enum
  EXPECT_NE(e.find("/regimes/1"), std::string::npos) << e;
  e = error_of(R"(["normal", {"name": "ties", "factor": 2}])"); // the schema's closed object
  EXPECT_NE(e.find("/regimes/1"), std::string::npos) << e;
  e = error_of(R"([])");
  EXPECT_NE(e.find("/regimes"), std::string::npos) << e;
  e = error_of(
      R"(["normal", {"name": "ties", "tolerance": {"bfloat16": {"atol": 0, "rtol": 0}}}])");
  EXPECT_NE(e.find("/regimes/1/tolerance"), std::string::npos) << e;
  EXPECT_NE(e.find("no output is bfloat16"), std::string::npos) << e;
  e = error_of(R"([{"name": "normal", "tolerance": {"float32": {"atol": 1, "rtol": 0}}}])");
  EXPECT_NE(e.find("task's own tolerance"), std::string::npos) << e;
}
