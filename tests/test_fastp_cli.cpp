// `kernelgate fastp` end to end: fixture files written to a temp folder, read by the file readers
// and scored through the CLI. Every expected value is worked out by hand in the comments.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "reports/environment.h"
#include "reports/remove_tree.h"
#include "reports/result_writer.h"
#include "suite/cli.h"
#include "suite/exit_codes.h"

using namespace kg;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

using test::lines;
using test::run;
using test::run_result;

class fastp_cli : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kg_fastp_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(getpid()));
    kg::remove_tree(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { kg::remove_tree(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const auto p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  std::string write(const std::string& name, const json& j) { return write(name, j.dump()); }

  // KernelBench eval_results.json: {"<id>": [sample 0]} from (id, correct, runtime ms).
  std::string kb_eval(const std::vector<std::tuple<int, bool, double>>& rows,
                      const std::string& name = "eval_results.json") {
    json j = json::object();
    for (const auto& [id, correct, runtime] : rows)
      j[std::to_string(id)] = json::array({{{"sample_id", 0},
                                            {"compiled", true},
                                            {"correctness", correct},
                                            {"metadata", json::object()},
                                            {"runtime", runtime},
                                            {"runtime_stats", json::object()}}});
    return write(name, j);
  }
  // baseline_time_torch.json with one level: {"level<L>": {"<id>_P<id>.py": {mean, ...}}}.
  std::string kb_baseline(const std::vector<std::pair<int, double>>& rows, int level = 1,
                          const std::string& name = "baseline_time_torch.json") {
    json lv = json::object();
    for (const auto& [id, mean] : rows)
      lv[std::to_string(id) + "_P" + std::to_string(id) + ".py"] = {
          {"mean", mean},      {"std", 0.01},       {"min", mean},
          {"max", mean},       {"num_trials", 100}, {"hardware", "NVIDIA H200"},
          {"device", "cuda:0"}};
    return write(name, json{{"level" + std::to_string(level), lv}});
  }
  // A kernelgate eval result with a real environment, so `kernelgate validate` can check it.
  // (records is a vector: a braced list holding one json would collapse to that json.)
  std::string eval_result(const std::vector<std::string>& intended,
                          const std::vector<json>& records,
                          const std::string& name = "eval_result.json") {
    json doc = {{"schema", "kernelgate.result/1"},          {"kind", "eval"},
                {"created", "2026-03-01T00:00:00Z"},        {"finished", "2026-03-01T00:01:00Z"},
                {"argv", {"kernelgate", "eval"}},           {"environment", collect_environment()},
                {"config", {{"intended_tasks", intended}}}, {"records", records},
                {"summary", {{"status", "complete"}}}};
    return write(name, doc);
  }

  json run_json(std::vector<std::string> args) {
    args.push_back("--json");
    const auto r = run(args);
    EXPECT_EQ(r.rc, exit_code::ok) << r.err;
    return json::parse(r.out);
  }

  fs::path dir_;
};

// One evaluation record.
json passed(const std::string& task, double baseline_us, double candidate_us,
            std::optional<std::pair<double, double>> ci = std::nullopt,
            const std::string& candidate = "cand") {
  json r = {{"type", "evaluation"},
            {"id", "eval/" + task + "/" + candidate},
            {"task", task},
            {"candidate", candidate},
            {"status", "PASSED"},
            {"status_reason", ""},
            {"candidate_us", candidate_us},
            {"baseline_us", baseline_us},
            {"speedup", baseline_us / candidate_us}};
  if (ci) r["speedup_ci95"] = {ci->first, ci->second};
  return r;
}
json failed(const std::string& task, const std::string& status, std::optional<double> baseline_us,
            const std::string& reason = "why", const std::string& candidate = "cand") {
  json r = {{"type", "evaluation"}, {"id", "eval/" + task + "/" + candidate},
            {"task", task},         {"candidate", candidate},
            {"status", status},     {"status_reason", reason}};
  if (baseline_us) r["baseline_us"] = *baseline_us;
  return r;
}

const json& at_p(const json& candidate, double p) {
  for (const auto& s : candidate["scores"])
    if (s["p"].get<double>() == p) return s;
  throw std::runtime_error("no score at p");
}

} // namespace

// KernelBench's first golden vector (docs/result-schema.md): is_correct [1,0,1,1,0], baseline
// [0.1,0.15,0.2,0.05,0.3], actual [0.2,0.15,0.3,0.01,0.2]. Correct speedups: 0.1/0.2 = 0.5,
// 0.2/0.3 = 0.667, 0.05/0.01 = 5. fast_1 = #{5} / 5 = 0.2; fast_0.5 = #{0.667, 5} / 5 = 0.4
// (0.5 is not > 0.5); geomean = (0.5 * 0.667 * 5)^(1/3) = 1.6667^(1/3) = 1.185631101.
TEST_F(fastp_cli, kernelbench_golden_vector_one_through_the_files) {
  const auto eval =
      kb_eval({{1, true, 0.2}, {2, false, 0.15}, {3, true, 0.3}, {4, true, 0.01}, {5, false, 0.2}});
  const auto base = kb_baseline({{1, 0.1}, {2, 0.15}, {3, 0.2}, {4, 0.05}, {5, 0.3}});
  const auto j = run_json({"fastp", eval, "--baseline", base});
  const auto& c = j["candidates"][0];
  EXPECT_EQ(c["tasks"]["aligned"], 5);
  EXPECT_DOUBLE_EQ(at_p(c, 1.0)["fast_p_aligned"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(at_p(c, 0.5)["fast_p_aligned"].get<double>(), 0.4);
  EXPECT_NEAR(c["geomean_speedup"]["value"].get<double>(), 1.185631101, 1e-9);
  EXPECT_EQ(c["geomean_speedup"]["tasks"], 3);
  EXPECT_EQ(j["source"]["sample_id"], 0);
  // The six p values KernelBench reports are the default.
  EXPECT_EQ(j["p_values"], json({0.0, 0.5, 0.8, 1.0, 1.5, 2.0}));
}

// The second golden vector: is_correct [1,1,1,1,0], baseline [0.24,0.31,100,0.0001,0.3], actual
// [0.3,0.3,200,0.0001,0.3]. Correct speedups 0.8, 1.0333, 0.5, 1.0. fast_1 = #{1.0333} / 5 = 0.2
// (the tie 1.0 does not count); fast_0.5 = #{0.8, 1.0333, 1.0} / 5 = 0.6; geomean =
// (0.8 * 1.0333 * 0.5 * 1)^(1/4) = 0.41333^(1/4) = 0.801816719.
TEST_F(fastp_cli, kernelbench_golden_vector_two_through_the_files) {
  const auto eval = kb_eval(
      {{1, true, 0.3}, {2, true, 0.3}, {3, true, 200.0}, {4, true, 0.0001}, {5, false, 0.3}});
  const auto base = kb_baseline({{1, 0.24}, {2, 0.31}, {3, 100.0}, {4, 0.0001}, {5, 0.3}});
  const auto j = run_json({"fastp", eval, "--baseline", base});
  const auto& c = j["candidates"][0];
  EXPECT_DOUBLE_EQ(at_p(c, 1.0)["fast_p_aligned"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(at_p(c, 0.5)["fast_p_aligned"].get<double>(), 0.6);
  EXPECT_NEAR(c["geomean_speedup"]["value"].get<double>(), 0.801816719, 1e-9);
}

// docs/result-schema.md's four-task example in KernelBench's files: A (1) correct at 1.5 / 1.0 = 1.5, B (2) correct at
// 1.0 / 1.0 = 1.0, C (3) incorrect, D (4) in the baseline but absent from eval_results. fast_1 =
// 1 / 4 = 0.25 over both sets. D is missing (not a measured failure). Wilson 1/4: z = 1.959964,
// centre (0.25 + z^2/8) / (1 + z^2/4) = 0.372473, half z sqrt(0.25*0.75/4 + z^2/64) / 1.960365 =
// 0.326886 -> [0.045587, 0.699359]. Exact bootstrap: Binomial(4, 0.25) has CDF 0.316, 0.738,
// 0.949, 0.996, 1 -> 2.5% quantile 0, 97.5% quantile 3 -> [0, 0.75].
TEST_F(fastp_cli, four_task_example_in_kernelbench_files) {
  const auto eval = kb_eval({{1, true, 1.0}, {2, true, 1.0}, {3, false, -1.0}});
  const auto base = kb_baseline({{1, 1.5}, {2, 1.0}, {3, 1.0}, {4, 1.0}});
  const auto j = run_json({"fastp", eval, "--baseline", base, "--p", "1"});
  const auto& c = j["candidates"][0];
  const auto& s = at_p(c, 1.0);
  EXPECT_EQ(s["fast"], 1);
  EXPECT_DOUBLE_EQ(s["fast_p_intended"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(s["fast_p_aligned"].get<double>(), 0.25);
  EXPECT_EQ(s["intended"], 4);
  EXPECT_EQ(s["aligned"], 4);
  EXPECT_EQ(s["correct"], 2);
  EXPECT_EQ(s["incorrect"], 1);
  EXPECT_EQ(s["missing"], 1);
  EXPECT_NEAR(s["wilson95_aligned"][0].get<double>(), 0.045587, 1e-6);
  EXPECT_NEAR(s["wilson95_aligned"][1].get<double>(), 0.699359, 1e-6);
  EXPECT_DOUBLE_EQ(s["ci95_aligned"][0].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(s["ci95_aligned"][1].get<double>(), 0.75);
  ASSERT_EQ(c["missing"].size(), 1u);
  EXPECT_EQ(c["missing"][0]["task"], "4");
  EXPECT_EQ(c["tasks"]["evaluated"], 3);
}

// The same four tasks in kernelgate's eval format: times in us, D has no record.
TEST_F(fastp_cli, four_task_example_in_a_kernelgate_eval_result) {
  const auto file = eval_result({"A", "B", "C", "D"},
                                {passed("A", 150.0, 100.0), passed("B", 100.0, 100.0),
                                 failed("C", "INCORRECT_NUMERICAL", 100.0, "max abs err 0.3")});
  const auto j = run_json({"fastp", file, "--p", "1"});
  ASSERT_EQ(j["candidates"].size(), 1u);
  const auto& c = j["candidates"][0];
  EXPECT_EQ(c["candidate"], "cand");
  const auto& s = at_p(c, 1.0);
  EXPECT_EQ(s["fast"], 1);
  EXPECT_DOUBLE_EQ(s["fast_p_intended"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(s["fast_p_aligned"].get<double>(), 0.25);
  EXPECT_EQ(s["incorrect"], 1);
  EXPECT_EQ(s["missing"], 1);
  ASSERT_EQ(c["missing"].size(), 1u);
  EXPECT_EQ(c["missing"][0]["task"], "D");
  EXPECT_EQ(c["missing"][0]["note"], "no evaluation record");
  EXPECT_TRUE(c["exclusions"].empty());
}

// Intended vs aligned: eval_results has 1, 2, 3, 5; the baseline has 1, 2, 3, 4. Intended =
// {1..5} = 5; aligned = {1, 2, 3, 4} = 4 (5 has no baseline entry); 4 is missing. Speedups: 1 ->
// 2.0 / 1.0 = 2 (fast at 1), 2 -> 1.0 / 2.0 = 0.5, 3 incorrect, 5 correct but unaligned. fast_1
// = 1: intended 1/5 = 0.2, aligned (KernelBench's number) 1/4 = 0.25.
TEST_F(fastp_cli, intended_and_aligned_sets_with_missing_problem_and_missing_baseline) {
  const auto eval = kb_eval({{1, true, 1.0}, {2, true, 2.0}, {3, false, -1.0}, {5, true, 1.0}});
  const auto base = kb_baseline({{1, 2.0}, {2, 1.0}, {3, 1.0}, {4, 1.0}});
  const auto j = run_json({"fastp", eval, "--baseline", base, "--p", "1"});
  const auto& c = j["candidates"][0];
  const auto& s = at_p(c, 1.0);
  EXPECT_EQ(s["intended"], 5);
  EXPECT_EQ(s["aligned"], 4);
  EXPECT_EQ(s["fast"], 1);
  EXPECT_DOUBLE_EQ(s["fast_p_intended"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(s["fast_p_aligned"].get<double>(), 0.25);
  ASSERT_EQ(c["exclusions"].size(), 1u);
  EXPECT_EQ(c["exclusions"][0]["task"], "5");
  EXPECT_EQ(c["exclusions"][0]["reason"], "no baseline entry for problem 5 in " + base + " level1");
  ASSERT_EQ(c["missing"].size(), 1u);
  EXPECT_EQ(c["missing"][0]["task"], "4");
  // Geomean over correct aligned tasks only: 1 and 2 -> sqrt(2 * 0.5) = 1 (5 is not aligned).
  EXPECT_NEAR(c["geomean_speedup"]["value"].get<double>(), 1.0, 1e-12);
  EXPECT_EQ(c["geomean_speedup"]["tasks"], 2);

  // The text lists the exclusion with its reason and the missing problem under "missing".
  const auto t = run({"fastp", eval, "--baseline", base, "--p", "1"});
  EXPECT_EQ(t.rc, exit_code::ok);
  EXPECT_NE(t.out.find("excluded from aligned (1):\n  5: no baseline entry for problem 5 in " +
                       base + " level1\n"),
            std::string::npos)
      << t.out;
  EXPECT_NE(t.out.find("missing (1; counted as not fast, not as measured failures):\n  4: not in " +
                       eval + "\n"),
            std::string::npos)
      << t.out;
  EXPECT_NE(t.out.find("scoring sample_id 0"), std::string::npos);
}

// --dataset: KernelBench's problem files are the problems, and a baseline entry counts only under
// the problem's whole file name (its analysis script's exact match). Problems on disk: 1_P1.py,
// 2_Renamed.py, 3_P3.py, 4_P4.py. The baseline has 1_P1.py, 2_P2.py (timed before problem 2 was
// renamed), 3_P3.py, 4_P4.py and a stale 9_P9.py; eval_results has 1, 2, 3 and a stray 7.
// Aligned: 1, 3, 4 (n = 3); 2 is excluded (no entry named 2_Renamed.py); 7 and 9 are not problems.
// Correct and > 1: problem 1 (2.0 / 1.0) only; 3 ties (1.0 / 1.0); 4 is missing. fast_1 = 1/3
// aligned, 1/4 intended. Without --dataset the '<id>_' match aligns 2 as well (and 7, 9 count).
TEST_F(fastp_cli, dataset_folder_sets_the_problems_and_exact_name_matching) {
  const auto eval = kb_eval({{1, true, 1.0}, {2, true, 0.5}, {3, true, 1.0}, {7, true, 0.1}});
  const auto base = kb_baseline({{1, 2.0}, {2, 1.0}, {3, 1.0}, {4, 1.0}, {9, 1.0}});
  const auto level = dir_ / "level1";
  fs::create_directories(level);
  for (const char* f : {"1_P1.py", "2_Renamed.py", "3_P3.py", "4_P4.py"})
    std::ofstream(level / f) << "# problem\n";
  std::ofstream(level / "README.md") << "not a problem\n";
  const auto j =
      run_json({"fastp", eval, "--baseline", base, "--dataset", level.string(), "--p", "1"});
  const auto& c = j["candidates"][0];
  const auto& s = at_p(c, 1.0);
  EXPECT_EQ(s["intended"], 4);
  EXPECT_EQ(s["aligned"], 3);
  EXPECT_EQ(s["fast"], 1);
  EXPECT_DOUBLE_EQ(s["fast_p_aligned"].get<double>(), 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(s["fast_p_intended"].get<double>(), 0.25);
  ASSERT_EQ(c["exclusions"].size(), 1u);
  EXPECT_EQ(c["exclusions"][0]["task"], "2");
  EXPECT_EQ(c["exclusions"][0]["reason"],
            "no baseline entry named '2_Renamed.py' in " + base + " level1");
  ASSERT_EQ(c["missing"].size(), 1u);
  EXPECT_EQ(c["missing"][0]["task"], "4");
  // The prefix match (no --dataset) counts 2 as aligned and 7 and 9 as problems.
  const auto k = run_json({"fastp", eval, "--baseline", base, "--p", "1"});
  EXPECT_EQ(at_p(k["candidates"][0], 1.0)["aligned"], 5);  // 1, 2, 3, 4, 9
  EXPECT_EQ(at_p(k["candidates"][0], 1.0)["intended"], 6); // and 7
  // A folder without problem files is bad input.
  const auto empty = dir_ / "empty";
  fs::create_directories(empty);
  const auto bad = run({"fastp", eval, "--baseline", base, "--dataset", empty.string()});
  EXPECT_EQ(bad.rc, exit_code::bad_input);
  EXPECT_EQ(lines(bad.err), 1) << bad.err;
}

// Level 4 has no baseline entries: 0 aligned with the reason, every problem excluded, exit 0.
// Fractions over an empty denominator are null (not a made-up 0).
TEST_F(fastp_cli, level_without_baseline_entries_reports_zero_aligned) {
  const auto eval = kb_eval({{1, true, 1.0}, {2, false, -1.0}});
  json base = {{"level1", {{"1_A.py", {{"mean", 2.0}}}}}, {"level4", json::object()}};
  const auto base_file = write("baseline.json", base);
  for (const std::string level : {"4", "3"}) { // "level4": {} and no "level3" key at all
    const auto r = run({"fastp", eval, "--baseline", base_file, "--level", level, "--json"});
    ASSERT_EQ(r.rc, exit_code::ok) << r.err;
    const auto j = json::parse(r.out);
    const auto& s = at_p(j["candidates"][0], 1.0);
    EXPECT_EQ(s["aligned"], 0);
    EXPECT_EQ(s["intended"], 2);
    EXPECT_TRUE(s["fast_p_aligned"].is_null());
    EXPECT_DOUBLE_EQ(s["fast_p_intended"].get<double>(), 0.0);
    ASSERT_EQ(j["notes"].size(), 1u);
    EXPECT_NE(j["notes"][0].get<std::string>().find("no baseline entries for level" + level),
              std::string::npos);
    EXPECT_EQ(j["candidates"][0]["exclusions"].size(), 2u);
  }
  const auto t = run({"fastp", eval, "--baseline", base_file, "--level", "4"});
  EXPECT_EQ(t.rc, exit_code::ok);
  EXPECT_NE(t.out.find("0 aligned"), std::string::npos) << t.out;
}

// Noise-aware counting and near-ties (min effect 3%), all aligned:
//   T1 speedup 120/100 = 1.2, CI [1.10, 1.30]
//   T2 1.1,  CI [0.98, 1.22]   (interval contains 1)
//   T3 1.02, CI [1.01, 1.03]   (|1.02 - 1| = 0.02 <= 0.03 * 1)
//   T4 0.95, CI [0.90, 0.99]   (|0.95 - 1| = 0.05 > 0.03; interval below 1)
//   T5 COMPILE_ERROR
// p = 1: strict fast {T1, T2, T3} = 3/5 = 0.6; noise-aware {T1 (1.10 > 1), T3 (1.01 > 1)} =
// 2/5 = 0.4; near-ties {T2 (interval), T3 (within 3%)}.
// p = 0.8: strict {T1..T4} = 4; noise-aware all four lower bounds > 0.8 = 4; near-ties none
// (0.03 * 0.8 = 0.024 band; no interval contains 0.8).
// Wilson 3/5 = [0.230724, 0.882379]; 2/5 = [0.117621, 0.769276]. Exact bootstrap 3/5:
// Binomial(5, 0.6) CDF 0.010, 0.087, 0.317, 0.663, 0.922, 1 -> [1/5, 5/5] = [0.2, 1.0].
TEST_F(fastp_cli, noise_aware_count_and_near_ties) {
  const auto file =
      eval_result({"T1", "T2", "T3", "T4", "T5"},
                  {passed("T1", 120, 100, {{1.10, 1.30}}), passed("T2", 110, 100, {{0.98, 1.22}}),
                   passed("T3", 102, 100, {{1.01, 1.03}}), passed("T4", 95, 100, {{0.90, 0.99}}),
                   failed("T5", "COMPILE_ERROR", 100.0, "nvcc: error")});
  const auto j = run_json({"fastp", file, "--p", "0.8,1"});
  const auto& c = j["candidates"][0];
  const auto& s1 = at_p(c, 1.0);
  EXPECT_EQ(s1["fast"], 3);
  EXPECT_DOUBLE_EQ(s1["fast_p_aligned"].get<double>(), 0.6);
  EXPECT_NEAR(s1["wilson95_aligned"][0].get<double>(), 0.230724, 1e-6);
  EXPECT_NEAR(s1["wilson95_aligned"][1].get<double>(), 0.882379, 1e-6);
  EXPECT_DOUBLE_EQ(s1["ci95_aligned"][0].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(s1["ci95_aligned"][1].get<double>(), 1.0);
  const auto& na = s1["noise_aware"];
  ASSERT_TRUE(na["available"].get<bool>());
  EXPECT_EQ(na["fast"], 2);
  EXPECT_DOUBLE_EQ(na["fast_p_aligned"].get<double>(), 0.4);
  EXPECT_NEAR(na["wilson95_aligned"][0].get<double>(), 0.117621, 1e-6);
  EXPECT_NEAR(na["wilson95_aligned"][1].get<double>(), 0.769276, 1e-6);
  ASSERT_EQ(s1["near_ties"].size(), 2u);
  EXPECT_EQ(s1["near_ties"][0]["task"], "T2");
  EXPECT_TRUE(s1["near_ties"][0]["interval_contains_p"].get<bool>());
  EXPECT_FALSE(s1["near_ties"][0]["within_min_effect"].get<bool>());
  EXPECT_EQ(s1["near_ties"][1]["task"], "T3");
  EXPECT_FALSE(s1["near_ties"][1]["interval_contains_p"].get<bool>());
  EXPECT_TRUE(s1["near_ties"][1]["within_min_effect"].get<bool>());

  const auto& s08 = at_p(c, 0.8);
  EXPECT_EQ(s08["fast"], 4);
  EXPECT_EQ(s08["noise_aware"]["fast"], 4);
  EXPECT_TRUE(s08["near_ties"].empty());

  // --min-effect 0.01: T3's 0.02 is outside the band; T2 stays (its interval contains 1).
  const auto k = run_json({"fastp", file, "--p", "1", "--min-effect", "0.01"});
  const auto& ties = at_p(k["candidates"][0], 1.0)["near_ties"];
  ASSERT_EQ(ties.size(), 1u);
  EXPECT_EQ(ties[0]["task"], "T2");

  const auto t = run({"fastp", file, "--p", "1"});
  EXPECT_NE(t.out.find("p=1  T2: speedup 1.1000 [0.9800, 1.2200] (interval contains p)"),
            std::string::npos)
      << t.out;
  EXPECT_NE(t.out.find("p=1  T3: speedup 1.0200 [1.0100, 1.0300] (within 3% of p)"),
            std::string::npos)
      << t.out;
}

// A task with a speedup but no interval: the noise-aware count is withheld with the reason (not
// counted as 0). KernelBench files never carry an interval: unavailable, with its own reason.
TEST_F(fastp_cli, noise_aware_is_unavailable_without_intervals) {
  const auto file =
      eval_result({"T1", "T2"}, {passed("T1", 120, 100, {{1.1, 1.3}}), passed("T2", 90, 100)});
  const auto j = run_json({"fastp", file, "--p", "1"});
  const auto& na = at_p(j["candidates"][0], 1.0)["noise_aware"];
  EXPECT_FALSE(na["available"].get<bool>());
  EXPECT_EQ(na["reason"], "1 of 2 correct timed tasks have no speedup interval (first: T2)");
  EXPECT_FALSE(na.contains("fast"));

  const auto eval = kb_eval({{1, true, 1.0}});
  const auto base = kb_baseline({{1, 2.0}});
  const auto k = run_json({"fastp", eval, "--baseline", base});
  const auto& kna = at_p(k["candidates"][0], 1.0)["noise_aware"];
  EXPECT_FALSE(kna["available"].get<bool>());
  EXPECT_NE(kna["reason"].get<std::string>().find("no interval"), std::string::npos);
  const auto t = run({"fastp", eval, "--baseline", base});
  EXPECT_NE(t.out.find("noise-aware fast_p: unavailable: "), std::string::npos) << t.out;
}

// INVALID_REFERENCE leaves the aligned set with its reason and is neither correct, incorrect
// nor missing; MISSING is missing; a record without baseline_us is excluded. Tasks: P passed
// 2.0x, R invalid reference, M MISSING, N passed without baseline. Intended 4; aligned {P, M}
// = 2; fast_1 = 1: intended 1/4, aligned 1/2.
TEST_F(fastp_cli, invalid_reference_missing_status_and_missing_baseline) {
  json no_base = passed("N", 100, 50);
  no_base.erase("baseline_us");
  no_base.erase("speedup");
  const auto file =
      eval_result({"P", "R", "M", "N"},
                  {passed("P", 200, 100),
                   failed("R", "INVALID_REFERENCE", std::nullopt, "reference output has NaN"),
                   failed("M", "MISSING", std::nullopt, "interrupted"), no_base});
  const auto j = run_json({"fastp", file, "--p", "1"});
  const auto& c = j["candidates"][0];
  const auto& s = at_p(c, 1.0);
  EXPECT_EQ(s["intended"], 4);
  EXPECT_EQ(s["aligned"], 2);
  EXPECT_EQ(s["unjudged"], 1);
  EXPECT_EQ(s["missing"], 1);
  EXPECT_EQ(s["correct"], 2);
  EXPECT_EQ(s["incorrect"], 0);
  EXPECT_DOUBLE_EQ(s["fast_p_intended"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(s["fast_p_aligned"].get<double>(), 0.5);
  ASSERT_EQ(c["exclusions"].size(), 2u);
  EXPECT_EQ(c["exclusions"][0]["task"], "R");
  EXPECT_EQ(c["exclusions"][0]["reason"], "INVALID_REFERENCE: reference output has NaN");
  EXPECT_EQ(c["exclusions"][1]["task"], "N");
  EXPECT_NE(c["exclusions"][1]["reason"].get<std::string>().find("no baseline_us"),
            std::string::npos);
  ASSERT_EQ(c["missing"].size(), 1u);
  EXPECT_EQ(c["missing"][0]["note"], "MISSING: interrupted");
}

// Two candidates: each scored on its own; --candidate picks one. a: X 2.0x, Y 0.5x -> fast_1 =
// 1/2; b: X 0.9x, Y missing -> fast_1 = 0/2.
TEST_F(fastp_cli, candidates_are_scored_separately_and_selectable) {
  const auto file = eval_result({"X", "Y"}, {passed("X", 200, 100, std::nullopt, "a"),
                                             passed("Y", 50, 100, std::nullopt, "a"),
                                             passed("X", 90, 100, std::nullopt, "b")});
  const auto j = run_json({"fastp", file, "--p", "1"});
  ASSERT_EQ(j["candidates"].size(), 2u);
  EXPECT_EQ(j["candidates"][0]["candidate"], "a");
  EXPECT_DOUBLE_EQ(at_p(j["candidates"][0], 1.0)["fast_p_aligned"].get<double>(), 0.5);
  EXPECT_EQ(j["candidates"][1]["candidate"], "b");
  EXPECT_DOUBLE_EQ(at_p(j["candidates"][1], 1.0)["fast_p_aligned"].get<double>(), 0.0);
  EXPECT_EQ(j["candidates"][1]["missing"][0]["task"], "Y");
  const auto k = run_json({"fastp", file, "--candidate", "b"});
  ASSERT_EQ(k["candidates"].size(), 1u);
  EXPECT_EQ(k["candidates"][0]["candidate"], "b");
  const auto t = run({"fastp", file});
  EXPECT_NE(t.out.find("candidate: a\n"), std::string::npos);
  EXPECT_NE(t.out.find("candidate: b\n"), std::string::npos);
}

// --out writes a fastp result (6 p values x 1 candidate = 6 records) that validates, with the
// environment embedded and the input's hash in the config.
TEST_F(fastp_cli, out_writes_a_valid_fastp_result) {
  const auto eval = kb_eval({{1, true, 1.0}, {2, false, -1.0}});
  const auto base = kb_baseline({{1, 2.0}, {2, 1.0}, {3, 1.0}});
  const auto out = dir_ / "out";
  const auto r = run({"fastp", eval, "--baseline", base, "--out", out.string()});
  ASSERT_EQ(r.rc, exit_code::ok) << r.err;
  ASSERT_TRUE(fs::exists(out / "result.json"));
  std::ifstream f(out / "result.json");
  const auto doc = json::parse(f);
  EXPECT_EQ(doc["kind"], "fastp");
  EXPECT_EQ(doc["records"].size(), 6u);
  EXPECT_EQ(doc["records"][3]["type"], "fast_p");
  EXPECT_EQ(doc["records"][3]["id"], "fast_p/kernelbench/p=1");
  EXPECT_TRUE(doc["environment"].contains("gpu"));
  EXPECT_EQ(doc["config"]["source"]["eval_results"]["sha256"].get<std::string>().size(), 64u);
  EXPECT_EQ(doc["summary"]["candidates"][0]["missing"][0]["task"], "3");
  std::ifstream rec(out / "records.jsonl");
  EXPECT_EQ(static_cast<int>(std::count(std::istreambuf_iterator<char>(rec),
                                        std::istreambuf_iterator<char>(), '\n')),
            6);
  const auto v = run({"validate", (out / "result.json").string()});
  EXPECT_EQ(v.rc, exit_code::ok) << v.err;
}

// The evaluation record rules of the schema: a well-formed eval result validates; a failed
// record carrying a time does not.
TEST_F(fastp_cli, evaluation_records_follow_the_schema) {
  const auto good = eval_result(
      {"A", "B", "C"}, {passed("A", 150, 100, {{1.4, 1.6}}), failed("B", "COMPILE_ERROR", 100.0),
                        failed("C", "MISSING", std::nullopt, "no candidate", "")});
  EXPECT_EQ(run({"validate", good}).rc, exit_code::ok);
  // An empty candidate belongs to MISSING records only.
  const auto anonymous =
      eval_result({"A"}, {passed("A", 150, 100, std::nullopt, "")}, "anonymous.json");
  EXPECT_EQ(run({"validate", anonymous}).rc, exit_code::failures);
  json timed_failure = failed("B", "REWARD_HACK", 100.0);
  timed_failure["candidate_us"] = 10.0;
  const auto bad = eval_result({"A", "B"}, {passed("A", 150, 100), timed_failure}, "bad.json");
  const auto v = run({"validate", bad});
  EXPECT_EQ(v.rc, exit_code::failures);
  // The reader refuses it too, naming the file and the record.
  const auto r = run({"fastp", bad});
  EXPECT_EQ(r.rc, exit_code::bad_input);
  EXPECT_NE(r.err.find(bad), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("eval/B/cand"), std::string::npos) << r.err;
}

// Bad input: one line on stderr naming the file (or the option) and the problem; exit code 2;
// nothing on stdout.
TEST_F(fastp_cli, bad_input_is_one_line_naming_the_file_with_exit_2) {
  const auto eval = kb_eval({{1, true, 1.0}});
  const auto base = kb_baseline({{1, 2.0}});
  const auto malformed = write("malformed.json", std::string("{\"1\": [ {\"sample_id\": 0,"));
  const auto wrong_type = write(
      "wrong_type.json",
      json{{"1",
            {{{"sample_id", 0}, {"compiled", true}, {"correctness", "yes"}, {"runtime", 1.0}}}}});
  const auto wrong_mean =
      write("wrong_mean.json", json{{"level1", {{"1_A.py", {{"mean", "fast"}}}}}});
  const auto no_prefix = write("no_prefix.json", json{{"level1", {{"A.py", {{"mean", 1.0}}}}}});
  const auto array_top = write("array.json", json::array({1, 2}));
  const auto audit =
      write("audit.json", json{{"schema", "kernelgate.result/1"}, {"kind", "audit"}});
  const auto kg = eval_result({"A"}, {passed("A", 150, 100)}, "kg.json");
  const auto not_intended = eval_result({"A"}, {passed("Z", 150, 100)}, "not_intended.json");
  json reversed_ci = passed("A", 150, 100);
  reversed_ci["speedup_ci95"] = {1.6, 1.4};
  const auto reversed = eval_result({"A"}, {reversed_ci}, "reversed.json");
  json anonymous = passed("A", 150, 100, std::nullopt, "");
  const auto anonymous_pass = eval_result({"A"}, {anonymous}, "anonymous.json");
  const auto missing = (dir_ / "nope.json").string();

  struct bad_case {
    std::vector<std::string> args;
    std::string must_name; // the file or the option the message must name
    std::string problem;   // a piece of the problem description
  };
  const std::vector<bad_case> cases = {
      {{"fastp", missing}, missing, "cannot read"},
      {{"fastp", malformed}, malformed, "malformed JSON"},
      {{"fastp", wrong_type, "--baseline", base}, wrong_type, "'correctness' must be a boolean"},
      {{"fastp", eval, "--baseline", wrong_mean}, wrong_mean, "'mean' must be a number"},
      {{"fastp", eval, "--baseline", no_prefix}, no_prefix, "'<id>_' prefix"},
      {{"fastp", eval, "--baseline", missing}, missing, "cannot read"},
      {{"fastp", eval}, eval, "--baseline FILE"},
      {{"fastp", array_top, "--baseline", base}, array_top, "neither"},
      {{"fastp", audit}, audit, "'audit' result"},
      {{"fastp", not_intended}, not_intended, "not in config.intended_tasks"},
      {{"fastp", reversed}, reversed, "'speedup_ci95' must be [lo, hi]"},
      {{"fastp", anonymous_pass}, anonymous_pass, "an empty 'candidate' with status PASSED"},
      {{"fastp", kg, "--candidate", "ghost"}, kg, "no candidate 'ghost'"},
      {{"fastp", kg, "--baseline", base}, kg, "apply to KernelBench"},
      {{"fastp", eval, "--baseline", base, "--candidate", "x"}, eval, "--candidate"},
      {{"fastp", eval, "--baseline", base, "--frobnicate", "1"}, "--frobnicate", "unknown option"},
      {{"fastp", eval, "--baseline", base, "--p", "a,b"}, "--p 'a,b'", "numbers"},
      {{"fastp", eval, "--baseline", base, "--p", "1,,2"}, "--p '1,,2'", "numbers"},
      {{"fastp", eval, "--baseline", base, "--p", "-1"}, "--p '-1'", "numbers"},
      {{"fastp", eval, "--baseline", base, "--p", ""}, "--p ''", "numbers"},
      {{"fastp", eval, "--baseline", base, "--min-effect", "2"}, "--min-effect '2'", "fraction"},
      {{"fastp", eval, "--baseline", base, "--level", "0"}, "--level '0'", "level"},
      {{"fastp", eval, "--baseline"}, "--baseline", "missing"},
      {{"fastp"}, "fastp", "result is required"},
  };
  for (const auto& c : cases) {
    const auto r = run(c.args);
    std::string cmd;
    for (const auto& a : c.args)
      cmd += a + " ";
    EXPECT_EQ(r.rc, exit_code::bad_input) << cmd << "\n" << r.err;
    EXPECT_EQ(lines(r.err), 1) << cmd << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("kernelgate: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(c.must_name), std::string::npos) << cmd << "\n" << r.err;
    EXPECT_NE(r.err.find(c.problem), std::string::npos) << cmd << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << cmd << "\n" << r.out;
  }
}

// An unusable --out folder is bad input, checked before anything is printed.
TEST_F(fastp_cli, unusable_output_folder_is_bad_input) {
  const auto eval = kb_eval({{1, true, 1.0}});
  const auto base = kb_baseline({{1, 2.0}});
  std::ofstream(dir_ / "a_file") << "x";
  const auto out = dir_ / "a_file" / "out";
  const auto r = run({"fastp", eval, "--baseline", base, "--out", out.string()});
  EXPECT_EQ(r.rc, exit_code::bad_input);
  EXPECT_EQ(lines(r.err), 1);
  EXPECT_NE(r.err.find(out.string()), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

// kernelgate eval's speedup is its ABBA-paired estimate, measured apart from the two cold
// medians; fastp scores it (its interval belongs to it). Q: baseline_us 100, candidate_us 100
// (ratio 1.0, not fast at 1) but paired speedup 1.05 [1.02, 1.08] -> fast and noise-aware fast at
// p = 1 (1.05 > 1, 1.02 > 1), not a near-tie (|0.05| > 0.03, interval above 1). S: a paired
// speedup without baseline_us is still aligned (the pairing measured the baseline): 0.5 [0.45,
// 0.55]. fast_1 = 1/2; geomean sqrt(1.05 * 0.5) = 0.724569.
TEST_F(fastp_cli, the_records_paired_speedup_is_scored) {
  json q = passed("Q", 100, 100, {{1.02, 1.08}});
  q["speedup"] = 1.05;
  json s = passed("S", 100, 200, {{0.45, 0.55}});
  s.erase("baseline_us");
  const auto file = eval_result({"Q", "S"}, {q, s});
  const auto j = run_json({"fastp", file, "--p", "1"});
  const auto& c = j["candidates"][0];
  const auto& r = at_p(c, 1.0);
  EXPECT_EQ(r["aligned"], 2);
  EXPECT_EQ(r["fast"], 1);
  EXPECT_EQ(r["noise_aware"]["fast"], 1);
  EXPECT_TRUE(r["near_ties"].empty());
  EXPECT_NEAR(c["geomean_speedup"]["value"].get<double>(), 0.724569, 1e-6);
}

// A task with no candidate at all: kernelgate eval writes a MISSING record with candidate "";
// for every named candidate that task is missing with that reason. Candidate a has T1 2.0x;
// T2 has no candidate -> a: fast_1 = 1/2, T2 missing "MISSING: no candidate for this task".
TEST_F(fastp_cli, a_candidate_less_missing_record_is_the_tasks_missing_reason) {
  const auto file = eval_result(
      {"T1", "T2"}, {passed("T1", 200, 100, std::nullopt, "a"),
                     failed("T2", "MISSING", std::nullopt, "no candidate for this task", "")});
  const auto j = run_json({"fastp", file, "--p", "1"});
  ASSERT_EQ(j["candidates"].size(), 1u);
  const auto& c = j["candidates"][0];
  EXPECT_EQ(c["candidate"], "a");
  EXPECT_DOUBLE_EQ(at_p(c, 1.0)["fast_p_aligned"].get<double>(), 0.5);
  ASSERT_EQ(c["missing"].size(), 1u);
  EXPECT_EQ(c["missing"][0]["task"], "T2");
  EXPECT_EQ(c["missing"][0]["note"], "MISSING: no candidate for this task");
}
