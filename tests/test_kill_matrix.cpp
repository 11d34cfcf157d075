// The kill matrix (mutants/kill_matrix.h) and suite optimization (mutants/input_suite.h), on
// hand-made matrices whose scores, intervals and optimal covers are worked out in the comments.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "mutants/checker_agreement.h"
#include "mutants/input_suite.h"
#include "mutants/kill_matrix.h"

using namespace kg;

namespace {

// Six mutants of one task in two families, one unwitnessed, one equivalent, and one control.
kill_matrix small_matrix() {
  std::vector<kill_row> rows = {
      {"a0", "arithmetic", "relu", witness_status::witnessed, false},
      {"a1", "arithmetic", "relu", witness_status::witnessed, false},
      {"a2", "arithmetic", "relu", witness_status::witnessed, false},
      {"p0", "precision", "relu", witness_status::witnessed, false},
      {"p1", "precision", "relu", witness_status::unwitnessed, false},
      {"p2", "precision", "relu", witness_status::equivalent, false},
      {"control:relu", "", "relu", witness_status::not_run, true},
  };
  kill_matrix m(rows, {"kernelbench", "strict"});
  // kernelbench: kills a0, a1; lets a2 and p0 through; survives the unwitnessed p1 (not an
  // escape); the control accepted.
  for (const auto* id : {"a0", "a1"})
    m.set(id, "kernelbench", kill_verdict::killed);
  for (const auto* id : {"a2", "p0", "p1", "p2", "control:relu"})
    m.set(id, "kernelbench", kill_verdict::survived);
  // strict: kills a0..a2, crashes on p0 (an error, excluded), rejects the control.
  for (const auto* id : {"a0", "a1", "a2", "control:relu"})
    m.set(id, "strict", kill_verdict::killed);
  m.set("p0", "strict", kill_verdict::error);
  return m;
}

} // namespace

TEST(kill_matrix, scores_count_witnessed_mutants_only_with_two_denominators) {
  const auto m = small_matrix();
  const auto kb = m.score("kernelbench");
  // Witnessed: a0, a1, a2, p0 (intended 4), all with a verdict (aligned 4): 2 killed, 2 escapes.
  EXPECT_EQ(kb.intended, 4);
  EXPECT_EQ(kb.aligned(), 4);
  EXPECT_EQ(kb.killed, 2);
  EXPECT_EQ(kb.survived, 2);
  EXPECT_DOUBLE_EQ(kb.mutation_score(), 0.5);
  EXPECT_DOUBLE_EQ(kb.escape_rate(), 0.5);
  // Wilson at k = 2, n = 4, z = 1.959964: centre (0.5 + z^2/8) / (1 + z^2/4) = 0.5, half-width
  // z sqrt(0.25/4 + z^2/64) / (1 + z^2/4) = 0.349961: [0.150039, 0.849961].
  EXPECT_NEAR(kb.escape_ci95().lo, 0.150039, 1e-5);
  EXPECT_NEAR(kb.escape_ci95().hi, 0.849961, 1e-5);
  const auto st = m.score("strict");
  // strict: 3 killed, p0 a checker error: excluded from aligned with its reason, never a kill.
  EXPECT_EQ(st.intended, 4);
  EXPECT_EQ(st.aligned(), 3);
  EXPECT_EQ(st.errors, 1);
  EXPECT_DOUBLE_EQ(st.mutation_score(), 1.0);
  const auto j = st.to_json();
  EXPECT_EQ(j["excluded"]["checker_error"], 1);
  EXPECT_EQ(j["intended"], 4);
  EXPECT_EQ(j["aligned"], 3);
}

TEST(kill_matrix, escapes_by_family_and_false_rejections) {
  const auto m = small_matrix();
  const auto fam = m.score_by_family("kernelbench");
  ASSERT_EQ(fam.size(), 2u);
  EXPECT_EQ(fam.at("arithmetic").survived, 1); // a2
  EXPECT_EQ(fam.at("arithmetic").aligned(), 3);
  EXPECT_EQ(fam.at("precision").survived, 1); // p0; p1 unwitnessed, p2 equivalent: not counted
  EXPECT_EQ(fam.at("precision").intended, 1);
  const auto esc = m.escapes("kernelbench");
  ASSERT_EQ(esc.size(), 2u);
  EXPECT_EQ(esc[0]->id, "a2");
  EXPECT_EQ(esc[1]->id, "p0");
  EXPECT_TRUE(m.false_rejections("kernelbench").empty());
  const auto fr = m.false_rejections("strict");
  ASSERT_EQ(fr.size(), 1u);
  EXPECT_EQ(fr[0]->task, "relu");
}

TEST(kill_matrix, round_trips_through_json_and_refuses_malformed_files) {
  const auto m = small_matrix();
  const auto j = m.to_json();
  EXPECT_EQ(j["cells"]["kernelbench"], "KKSSSSS");
  EXPECT_EQ(j["cells"]["strict"], "KKKE..K");
  const auto back = kill_matrix::from_json(j);
  EXPECT_EQ(back.rows(), m.rows());
  EXPECT_EQ(back.to_json(), j);
  auto bad = j;
  bad["cells"]["strict"] = "KKKE..";
  EXPECT_THROW(kill_matrix::from_json(bad), std::invalid_argument);
  bad = j;
  bad["cells"]["strict"] = "KKKE..X";
  EXPECT_THROW(kill_matrix::from_json(bad), std::invalid_argument);
  bad = j;
  bad["rows"][0]["status"] = "witness";
  EXPECT_THROW(kill_matrix::from_json(bad), std::invalid_argument);
  bad = j;
  bad["rows"][1]["id"] = "a0";
  EXPECT_THROW(kill_matrix::from_json(bad), std::invalid_argument);
  bad = j;
  bad["cells"].erase("strict");
  EXPECT_THROW(kill_matrix::from_json(bad), std::invalid_argument);
}

TEST(kill_matrix, merges_runs_cell_by_cell_and_reports_disagreement) {
  // Run 1 checked a0, a1 with kernelbench; run 2 a2 (a new row a3 too) and the sol protocol.
  kill_matrix r1({{"a0", "arithmetic", "relu", witness_status::witnessed, false},
                  {"a1", "arithmetic", "relu", witness_status::not_run, false}},
                 {"kernelbench"});
  r1.set("a0", "kernelbench", kill_verdict::killed);
  kill_matrix r2({{"a1", "arithmetic", "relu", witness_status::witnessed, false},
                  {"a3", "boundary", "relu", witness_status::witnessed, false}},
                 {"kernelbench", "sol"});
  r2.set("a1", "kernelbench", kill_verdict::survived);
  r2.set("a3", "sol", kill_verdict::timeout);
  const auto m = kill_matrix::merge(r1, r2);
  EXPECT_EQ(m.rows().size(), 3u);
  EXPECT_EQ(m.checkers(), (std::vector<std::string>{"kernelbench", "sol"}));
  EXPECT_EQ(m.at("a0", "kernelbench"), kill_verdict::killed);
  EXPECT_EQ(m.at("a1", "kernelbench"), kill_verdict::survived);
  EXPECT_EQ(m.rows()[m.row_index("a1")].status, witness_status::witnessed); // not_run yields
  EXPECT_EQ(m.at("a3", "sol"), kill_verdict::timeout);
  EXPECT_EQ(m.at("a0", "sol"), kill_verdict::missing);
  // The same cell observed twice with different verdicts: refused, naming it.
  kill_matrix r3({{"a0", "arithmetic", "relu", witness_status::witnessed, false}}, {"kernelbench"});
  r3.set("a0", "kernelbench", kill_verdict::survived);
  try {
    (void)kill_matrix::merge(r1, r3);
    FAIL() << "a disagreement was merged";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'a0' x 'kernelbench' is killed in one run, survived"),
              std::string::npos)
        << e.what();
  }
  kill_matrix r4({{"a0", "precision", "relu", witness_status::witnessed, false}}, {});
  EXPECT_THROW(kill_matrix::merge(r1, r4), std::invalid_argument);
}

// ---- suite optimization ------------------------------------------------------------------------

namespace {

// Mutants m0..m5 whose ids end in even digits (all development) unless noted. Configurations:
//   big   kills m0 m1 m2 m3      (greedy's first pick: the most)
//   left  kills m0 m2 m4
//   right kills m1 m3 m5
// Greedy takes big, then needs m4 (left) and m5 (right): 3 configurations. The optimum is
// {left, right}: 2.
cover_problem classic() {
  cover_problem p;
  p.configs = {"big", "left", "right"};
  p.mutants = {"00", "02", "04", "06", "08", "0a"};
  auto set = [&](std::vector<int> ms) {
    std::vector<bool> row(p.mutants.size(), false);
    for (const int m : ms)
      row[static_cast<std::size_t>(m)] = true;
    return row;
  };
  p.kills = {set({0, 1, 2, 3}), set({0, 2, 4}), set({1, 3, 5})};
  p.fails_control = {false, false, false};
  return p;
}

// "c7": built by appending (g++ 12's -Wrestrict misfires on a literal + std::to_string).
std::string named(char prefix, int n) {
  std::string s(1, prefix);
  s += std::to_string(n);
  return s;
}

std::vector<std::size_t> all_of(const cover_problem& p) {
  std::vector<std::size_t> v(p.mutants.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = i;
  return v;
}

} // namespace

TEST(input_suite, exact_search_beats_greedy_on_the_classic_counterexample) {
  const auto p = classic();
  const auto g = greedy_cover(p, all_of(p));
  EXPECT_EQ(g.chosen, (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_FALSE(g.minimal);
  const auto e = minimum_cover(p, all_of(p));
  EXPECT_EQ(e.chosen, (std::vector<std::size_t>{1, 2}));
  EXPECT_TRUE(e.minimal);
  EXPECT_TRUE(e.uncoverable.empty());
  // Above the exact limit, greedy's answer, not claimed minimal.
  const auto capped = minimum_cover(p, all_of(p), 2);
  EXPECT_EQ(capped.chosen.size(), 3u);
  EXPECT_FALSE(capped.minimal);
}

TEST(input_suite, a_configuration_failing_a_correct_kernel_is_never_chosen) {
  auto p = classic();
  p.fails_control = {false, true, false}; // "left" fails a correct kernel
  const auto e = minimum_cover(p, all_of(p));
  // Without left, m4 is killed by nothing allowed: uncoverable; the rest need big + right.
  EXPECT_EQ(e.uncoverable, (std::vector<std::size_t>{4}));
  EXPECT_EQ(e.chosen, (std::vector<std::size_t>{0, 2}));
  const auto s = suggest_input_suite(p);
  EXPECT_EQ(s.disallowed, (std::vector<std::string>{"left"}));
  EXPECT_EQ(s.configs, (std::vector<std::string>{"big", "right"}));
}

TEST(input_suite, chosen_on_development_mutants_reported_on_held_out_ones) {
  EXPECT_FALSE(held_out("3f2a"));
  EXPECT_TRUE(held_out("3f2b"));
  EXPECT_TRUE(held_out("0F"));
  EXPECT_THROW(held_out("xyz"), std::invalid_argument);
  EXPECT_THROW(held_out(""), std::invalid_argument);
  // Development: d0 (killed by "a" only), d1 ("b" only). Held out: h1 ("a"), h3 ("c" only),
  // h5 ("a" and "c"). The suite is {a, b}: it kills both development mutants and h1 and h5 of
  // the three held out: 2/3, Wilson [0.2077, 0.9385] (z = 1.96, n = 3).
  cover_problem p;
  p.configs = {"a", "b", "c"};
  p.mutants = {"d0", "d2", "h1", "h3", "h5"};
  p.kills = {{true, false, true, false, true},
             {false, true, false, false, false},
             {false, false, false, true, true}};
  p.fails_control = {false, false, false};
  const auto s = suggest_input_suite(p);
  EXPECT_EQ(s.configs, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(s.cover.minimal);
  EXPECT_EQ(s.dev_mutants, 2);
  EXPECT_EQ(s.dev_killed, 2);
  EXPECT_EQ(s.held_out_mutants, 3);
  EXPECT_EQ(s.held_out_killed, 2);
  EXPECT_NEAR(s.held_out_ci95.lo, 0.2077, 1e-3);
  EXPECT_NEAR(s.held_out_ci95.hi, 0.9385, 1e-3);
  EXPECT_EQ(s.to_json()["held_out"]["killed"], 2);
  // Sizes that disagree are refused.
  p.kills.pop_back();
  EXPECT_THROW(suggest_input_suite(p), std::invalid_argument);
}

TEST(input_suite, exact_search_matches_brute_force_on_random_matrices) {
  // 200 random problems of 10 configurations x 30 mutants (each kill with probability 0.15): the
  // size minimum_cover finds equals the smallest subset found by trying all 1024, and its picks
  // cover everything coverable.
  std::uint64_t state = 20261202;
  auto next = [&] { // xorshift64: a fixed, portable stream
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  for (int trial = 0; trial < 200; ++trial) {
    cover_problem p;
    for (int c = 0; c < 10; ++c)
      p.configs.push_back(named('c', c));
    for (int m = 0; m < 30; ++m)
      p.mutants.push_back(named('m', 2 * m)); // even: every one development
    p.kills.assign(10, std::vector<bool>(30, false));
    for (auto& row : p.kills)
      for (std::size_t m = 0; m < row.size(); ++m)
        row[m] = next() % 100 < 15;
    p.fails_control.assign(10, false);
    const auto all = all_of(p);
    auto covered_by = [&](unsigned mask) {
      std::vector<bool> hit(30, false);
      for (int c = 0; c < 10; ++c)
        if (mask >> c & 1)
          for (int m = 0; m < 30; ++m)
            if (p.kills[static_cast<std::size_t>(c)][static_cast<std::size_t>(m)])
              hit[static_cast<std::size_t>(m)] = true;
      return hit;
    };
    const auto reachable = covered_by(1023);
    int best = 11;
    for (unsigned mask = 0; mask < 1024; ++mask)
      if (covered_by(mask) == reachable) best = std::min(best, __builtin_popcount(mask));
    const auto e = minimum_cover(p, all);
    ASSERT_EQ(static_cast<int>(e.chosen.size()), best) << "trial " << trial;
    unsigned mask = 0;
    for (const auto c : e.chosen)
      mask |= 1u << c;
    EXPECT_EQ(covered_by(mask), reachable) << "trial " << trial;
    EXPECT_GE(greedy_cover(p, all).chosen.size(), e.chosen.size());
  }
}

TEST(kill_matrix, two_checkers_agree_where_both_gave_a_verdict) {
  // small_matrix's kernelbench against strict of another run with rows of its own:
  //   a0 K/K same, a1 K/K same, a2 S/K differ (killed only by strict), p0 S/E (no verdict on
  //   the second side), p1 S/. (missing there), p2 S/K differ, control S/S same; x9 only in the
  //   second. Compared 5, same 3.
  const auto a = small_matrix();
  kill_matrix b({{"a0", "arithmetic", "relu", witness_status::witnessed, false},
                 {"a1", "arithmetic", "relu", witness_status::witnessed, false},
                 {"a2", "arithmetic", "relu", witness_status::witnessed, false},
                 {"p0", "precision", "relu", witness_status::witnessed, false},
                 {"p1", "precision", "relu", witness_status::unwitnessed, false},
                 {"p2", "precision", "relu", witness_status::equivalent, false},
                 {"x9", "precision", "relu", witness_status::witnessed, false},
                 {"control:relu", "", "relu", witness_status::not_run, true}},
                {"other"});
  for (const auto* id : {"a0", "a1", "a2", "p2"})
    b.set(id, "other", kill_verdict::killed);
  b.set("p0", "other", kill_verdict::error);
  b.set("control:relu", "other", kill_verdict::survived);
  b.set("x9", "other", kill_verdict::killed);
  const auto r = compare_checkers(a, "kernelbench", b, "other");
  EXPECT_EQ(r.compared, 5);
  EXPECT_EQ(r.same, 3);
  EXPECT_EQ(r.compared_controls, 1);
  EXPECT_EQ(r.compared_witnessed, 3); // a0, a1, a2 (p2 is equivalent)
  EXPECT_EQ(r.killed_by_a_only, 0);
  EXPECT_EQ(r.killed_by_b_only, 2);
  EXPECT_EQ(r.no_verdict_b, 2); // p0 (error), p1 (missing)
  EXPECT_EQ(r.only_in_b, 1);
  EXPECT_EQ(r.only_in_a, 0);
  ASSERT_EQ(r.differences.size(), 2u);
  EXPECT_EQ(r.differences[0].row.id, "a2");
  EXPECT_EQ(r.differences[1].row.id, "p2");
  EXPECT_DOUBLE_EQ(r.rate(), 0.6);
  // Wilson 95% for 3 of 5 (z = 1.959964): centre (0.6 + z^2/10) / (1 + z^2/5) = 0.5566,
  // half-width z sqrt(0.24/5 + z^2/100) / (1 + z^2/5) = 0.3258.
  EXPECT_NEAR(r.rate_ci95().lo, 0.2307, 1e-3);
  EXPECT_NEAR(r.rate_ci95().hi, 0.8824, 1e-3);
  EXPECT_THROW((void)compare_checkers(a, "nope", b, "other"), std::out_of_range);
  kill_matrix c({{"a0", "arithmetic", "softmax", witness_status::witnessed, false}}, {"other"});
  EXPECT_THROW((void)compare_checkers(a, "kernelbench", c, "other"), std::invalid_argument);
}
