// Shards and their merge (suite/shard_plan.h, suite/merge_command.h, suite/slurm_command.h,
// suite/local_shards.h) without a cluster: the split by hand, the suite's split through
// `run --shard --dry-run`, `audit checker --cmd` in shards merged against the unsharded run, a
// missing shard, a resumed one, shards that must not be merged, the Slurm scripts and the
// scontrol parser. The real cluster: tests/slurm_cluster.sh.
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "scratch_dir.h"
#include "suite/exit_codes.h"
#include "suite/shard_plan.h"
#include "suite/slurm_command.h"
#include "timing/interrupt.h"

using namespace kg;
using kg::test::run;
namespace fs = std::filesystem;

namespace {

std::string text_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<nlohmann::json> jsonl(const fs::path& p) {
  std::vector<nlohmann::json> out;
  std::ifstream in(p);
  for (std::string l; std::getline(in, l);)
    out.push_back(nlohmann::json::parse(l));
  return out;
}

// row -> verdict of a verdicts.jsonl
std::map<std::string, std::string> verdicts(const fs::path& p) {
  std::map<std::string, std::string> m;
  for (const auto& j : jsonl(p))
    m[j["row"].get<std::string>()] = j["verdict"].get<std::string>();
  return m;
}

} // namespace

TEST(shard_plan, shard_specs_are_zero_based_i_of_n) {
  std::string why;
  const auto s = parse_shard_spec("2/4", why);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->index, 2);
  EXPECT_EQ(s->count, 4);
  EXPECT_TRUE(parse_shard_spec("0/1", why));
  for (const char* bad : {"4/4", "-1/4", "1/0", "1", "a/b", "1/4x", "", "1/5000"}) {
    EXPECT_FALSE(parse_shard_spec(bad, why)) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
}

TEST(shard_plan, longest_first_to_the_shard_that_ends_lowest) {
  // Costs 5 4 3 3 2 1 over 2 shards, by hand: 5->0 (5), 4->1 (4), 3->1 (7), 3->0 (8),
  // 2->1 (9), 1->0 (9).
  std::vector<shard_item> items;
  for (double c : {5, 4, 3, 3, 2, 1})
    items.push_back({"w" + std::to_string(items.size()), c, "", 0});
  EXPECT_EQ(assign_shards(items, 2), (std::vector<int>{0, 1, 1, 0, 1, 0}));
  // Equal costs: round robin in input order.
  std::vector<shard_item> same(7, shard_item{"x", 1, "", 0});
  EXPECT_EQ(assign_shards(same, 3), (std::vector<int>{0, 1, 2, 0, 1, 2, 0}));
  EXPECT_THROW(assign_shards(items, 0), std::invalid_argument);
}

TEST(shard_plan, a_set_up_a_shard_lacks_counts_against_it) {
  // D (11 s, no set-up) first to shard 0; A and B share set-up g (10 s): A goes to shard 1
  // (0 + 2 + 10 = 12 against 11 + 2 + 10 = 23), then B joins it there (12 + 2 = 14 against 23).
  std::vector<shard_item> items = {{"A", 2, "g", 10}, {"B", 2, "g", 10}, {"D", 11, "", 0}};
  EXPECT_EQ(assign_shards(items, 2), (std::vector<int>{1, 1, 0}));
  // With D at 1 s the set-up is paid twice: A -> 0 (12, a tie, lowest index), B -> 1 (12 on the
  // empty shard against 14 beside A), D -> 0 (13, a tie).
  items[2].cost = 1;
  EXPECT_EQ(assign_shards(items, 2), (std::vector<int>{0, 1, 0}));
}

TEST(shard_plan, every_item_in_exactly_one_shard_and_the_split_depends_only_on_the_list) {
  std::vector<shard_item> items;
  for (int i = 0; i < 50; ++i)
    items.push_back({"w" + std::to_string(i), 1.0 + (i * 37 % 11), i % 3 ? "a" : "b", 2});
  for (int n : {1, 2, 3, 7}) {
    std::multiset<std::size_t> seen;
    for (int k = 0; k < n; ++k)
      for (auto i : items_of_shard(items, {k, n}))
        seen.insert(i);
    EXPECT_EQ(seen.size(), items.size());
    EXPECT_EQ(std::set<std::size_t>(seen.begin(), seen.end()).size(), items.size());
    EXPECT_EQ(assign_shards(items, n), assign_shards(items, n));
  }
}

TEST(shard_cli, the_nightly_suite_splits_into_parts_that_cover_it_once_and_finish_together) {
  const auto whole = run({"run", "--suite", "nightly", "--dry-run"});
  ASSERT_EQ(whole.rc, 0) << whole.err;
  const std::regex line(R"(^  (\S+)\s+([0-9.]+) s$)");
  auto ids_and_cost = [&](const std::string& out, double& cost) {
    std::vector<std::string> ids;
    cost = 0;
    std::istringstream in(out);
    std::smatch m;
    for (std::string l; std::getline(in, l);)
      if (std::regex_match(l, m, line)) {
        ids.push_back(m[1]);
        cost += std::stod(m[2]);
      }
    return ids;
  };
  double total = 0, largest = 0;
  const auto all = ids_and_cost(whole.out, total);
  {
    std::istringstream in(whole.out);
    std::smatch m;
    for (std::string l; std::getline(in, l);)
      if (std::regex_match(l, m, line)) largest = std::max(largest, std::stod(m[2]));
  }
  ASSERT_EQ(all.size(), 160u);
  std::multiset<std::string> seen;
  double lo = 1e30, hi = 0;
  for (int k = 0; k < 4; ++k) {
    const auto part =
        run({"run", "--suite", "nightly", "--dry-run", "--shard", std::to_string(k) + "/4"});
    ASSERT_EQ(part.rc, 0) << part.err;
    EXPECT_NE(part.out.find("shard " + std::to_string(k) + " of 4"), std::string::npos);
    double cost = 0;
    for (const auto& id : ids_and_cost(part.out, cost))
      seen.insert(id);
    lo = std::min(lo, cost);
    hi = std::max(hi, cost);
  }
  EXPECT_EQ(seen, std::multiset<std::string>(all.begin(), all.end()));
  // Longest first to the least loaded: no part ends more than the largest workload after another.
  EXPECT_LE(hi - lo, largest + 0.5) << "parts from " << lo << " to " << hi << " s";
  const auto bad = run({"run", "--suite", "nightly", "--dry-run", "--shard", "4/4"});
  EXPECT_EQ(bad.rc, exit_code::bad_input);
  EXPECT_NE(bad.err.find("--shard"), std::string::npos);
}

namespace {

// One task ("twice") with two kernels' worth of mutants, all witnessed, and a checker that
// accepts by the candidate's checksum (mixed, reproducible verdicts).
struct audit_fixture {
  fs::path base, root, catalog, witnesses, checker;
};

const audit_fixture& fx() {
  static const audit_fixture f = [] {
    audit_fixture x;
    x.base = kg::test::scratch_dir("shards");
    x.root = x.base / "root";
    x.catalog = x.base / "catalog";
    x.witnesses = x.base / "witnesses.jsonl";
    x.checker = x.base / "checker.sh";
    fs::create_directories(x.root / "k");
    fs::create_directories(x.root / "data" / "tasks");
    std::ofstream(x.root / "k" / "twice.cu")
        << "__global__ void twice(const float* x, float* y, int n) {\n"
           "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
           "  if (i < n) y[i] = x[i] * 2.0f + 0.5f;\n"
           "}\n";
    std::ofstream(x.root / "data" / "tasks" / "twice.json") << "{\"id\": \"twice\"}\n";
    const auto g = run({"mutants", "generate", "--root", x.root.string(), "--kernels", "k/*.cu",
                        "--out", x.catalog.string()});
    EXPECT_EQ(g.rc, 0) << g.err;
    std::ofstream w(x.witnesses);
    for (const auto& m : jsonl(x.catalog / "catalog.jsonl"))
      w << nlohmann::json{{"id", m["id"]}, {"status", "witnessed"}}.dump() << "\n";
    std::ofstream(x.checker) << "#!/bin/sh\n"
                                "[ $(( $(cksum < \"$2\" | cut -d' ' -f1) % 2 )) -eq 0 ]\n";
    fs::permissions(x.checker, fs::perms::owner_all);
    return x;
  }();
  return f;
}

std::vector<std::string> audit_args(const fs::path& out, std::vector<std::string> extra = {}) {
  const auto& f = fx();
  std::vector<std::string> a = {"audit",         "checker",
                                "--cmd",         f.checker.string() + " {task} {candidate}",
                                "--catalog",     f.catalog.string(),
                                "--witnesses",   f.witnesses.string(),
                                "--root",        f.root.string(),
                                "--jobs",        "2",
                                "--no-progress", "--out",
                                out.string()};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

fs::path shard_out(const std::string& name, int k) {
  return fx().base / name / std::to_string(k);
}

} // namespace

TEST(shard_cli, audit_shards_merge_to_the_unsharded_verdicts_and_merging_again_changes_nothing) {
  const auto whole = fx().base / "whole";
  const auto w = run(audit_args(whole));
  ASSERT_LE(w.rc, 1) << w.err;
  const auto expected = verdicts(whole / "verdicts.jsonl");
  ASSERT_GT(expected.size(), 10u);
  std::set<std::string> values;
  for (const auto& [row, v] : expected)
    values.insert(v);
  EXPECT_EQ(values, (std::set<std::string>{"killed", "survived"})); // the checker mixes them
  std::vector<std::string> dirs = {"merge"};
  for (int k = 0; k < 3; ++k) {
    const auto s = run(audit_args(shard_out("three", k), {"--shard", std::to_string(k) + "/3"}));
    ASSERT_LE(s.rc, 1) << s.err;
    const auto m = read_shard_manifest(shard_out("three", k));
    EXPECT_EQ(m.spec.index, k);
    EXPECT_EQ(m.items.size(), expected.size());
    EXPECT_EQ(verdicts(shard_out("three", k) / "verdicts.jsonl").size(), m.assigned.size());
    dirs.push_back(shard_out("three", k).string());
  }
  const auto out = fx().base / "merged";
  dirs.insert(dirs.end(), {"--out", out.string()});
  const auto m = run(dirs);
  ASSERT_EQ(m.rc, w.rc) << m.err << m.out;
  EXPECT_EQ(verdicts(out / "verdicts.jsonl"), expected);
  EXPECT_EQ(text_of(out / "kill_matrix.json"), text_of(whole / "kill_matrix.json"));
  const auto a = nlohmann::json::parse(text_of(whole / "summary.json"));
  const auto b = nlohmann::json::parse(text_of(out / "summary.json"));
  EXPECT_EQ(a["score"], b["score"]);
  EXPECT_EQ(a["families"], b["families"]);
  EXPECT_EQ(b["status"], "complete");
  EXPECT_TRUE(b["missing"].empty());
  const auto first = text_of(out / "summary.json");
  ASSERT_EQ(run(dirs).rc, w.rc);
  EXPECT_EQ(text_of(out / "summary.json"), first);
}

TEST(shard_cli, a_shard_that_never_ran_is_missing_item_by_item_with_its_log) {
  for (int k : {0, 2})
    ASSERT_LE(run(audit_args(shard_out("gap", k), {"--shard", std::to_string(k) + "/3"})).rc, 1);
  const auto logs = fx().base / "gap-logs";
  fs::create_directories(logs);
  std::ofstream(logs / "shard-1.log") << "slurmstepd: error: *** JOB 7 CANCELLED ***\n";
  const auto out = fx().base / "gap-merged";
  const auto m =
      run({"merge", shard_out("gap", 0).string(), shard_out("gap", 1).string(),
           shard_out("gap", 2).string(), "--logs", logs.string(), "--out", out.string()});
  EXPECT_EQ(m.rc, exit_code::failures) << m.err;
  EXPECT_NE(m.err.find("left out"), std::string::npos) << m.err; // the folder that is not there
  EXPECT_NE(m.err.find("JOB 7 CANCELLED"), std::string::npos) << m.err;
  const auto s = nlohmann::json::parse(text_of(out / "summary.json"));
  EXPECT_EQ(s["status"], "incomplete");
  // Shard 1's items are exactly those of the plan no other shard was given.
  const auto m0 = read_shard_manifest(shard_out("gap", 0));
  const auto m2 = read_shard_manifest(shard_out("gap", 2));
  std::set<std::string> given(m0.assigned.begin(), m0.assigned.end());
  given.insert(m2.assigned.begin(), m2.assigned.end());
  std::set<std::string> missing;
  for (const auto& x : s["missing"]) {
    EXPECT_EQ(x["shard"], 1);
    missing.insert(x["id"].get<std::string>());
  }
  std::set<std::string> expected;
  for (const auto& id : m0.items)
    if (!given.count(id)) expected.insert(id);
  EXPECT_EQ(missing, expected);
  EXPECT_FALSE(missing.empty());
  EXPECT_EQ(s["shards"][1]["state"], "absent");
  EXPECT_NE(s["shards"][1]["log_tail"].get<std::string>().find("CANCELLED"), std::string::npos);
  // Missing is not killed: the kill matrix leaves those cells unobserved.
  const auto& sc = s["score"];
  EXPECT_EQ(sc["excluded"]["missing"].get<int>(),
            static_cast<int>(missing.size()) -
                1 /* the control is no mutant */ * (missing.count("control:k/twice.cu")));
  EXPECT_EQ(sc["excluded"]["missing"].get<int>() + sc["aligned"].get<int>() +
                sc["excluded"]["checker_error"].get<int>() + sc["excluded"]["timeout"].get<int>(),
            sc["intended"].get<int>());
}

TEST(shard_cli, a_killed_shard_resumes_without_calling_twice) {
  const auto dir = shard_out("resume", 1);
  ASSERT_LE(run(audit_args(dir, {"--shard", "1/3"})).rc, 1);
  const auto full = verdicts(dir / "verdicts.jsonl");
  // As a kill leaves it: two whole lines, a torn third, no summary.
  auto lines = jsonl(dir / "verdicts.jsonl");
  ASSERT_GE(lines.size(), 3u);
  {
    std::ofstream f(dir / "verdicts.jsonl", std::ios::trunc);
    f << lines[0].dump() << "\n" << lines[1].dump() << "\n" << lines[2].dump().substr(0, 20);
  }
  fs::remove(dir / "summary.json");
  auto args = audit_args(dir, {"--shard", "1/3", "--resume", dir.string()});
  const auto r = run(args);
  ASSERT_LE(r.rc, 1) << r.err;
  EXPECT_NE(r.err.find("2 verdicts kept"), std::string::npos) << r.err;
  std::vector<std::string> rows;
  for (const auto& j : jsonl(dir / "verdicts.jsonl"))
    rows.push_back(j["row"].get<std::string>());
  EXPECT_EQ(std::set<std::string>(rows.begin(), rows.end()).size(), rows.size());
  EXPECT_EQ(verdicts(dir / "verdicts.jsonl"), full);
  // Resuming as another shard, or another audit, is refused.
  const auto other = run(audit_args(dir, {"--shard", "2/3", "--resume", dir.string()}));
  EXPECT_EQ(other.rc, exit_code::bad_input);
  EXPECT_NE(other.err.find("a different audit"), std::string::npos) << other.err;
}

TEST(shard_cli, shards_of_different_builds_gpu_models_or_checkers_are_not_merged) {
  for (int k : {0, 1})
    ASSERT_LE(run(audit_args(shard_out("mixed", k), {"--shard", std::to_string(k) + "/2"})).rc, 1);
  const auto file = shard_out("mixed", 1) / "shard.json";
  const auto original = text_of(file);
  auto edit = [&](const std::function<void(nlohmann::json&)>& f) {
    auto j = nlohmann::json::parse(original);
    f(j);
    std::ofstream(file, std::ios::trunc) << j.dump();
  };
  auto merge = [&] {
    return run({"merge", shard_out("mixed", 0).string(), shard_out("mixed", 1).string(), "--out",
                (fx().base / "mixed-merged").string()});
  };
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> cases = {
      {[](auto& j) { j["environment"]["git"]["revision"] = "0123abcd"; }, "different builds"},
      {[](auto& j) { j["environment"]["gpu"]["name"] = "NVIDIA A100"; }, "different GPU models"},
      {[](auto& j) { j["identity"]["cmd"] = "true {candidate}"; }, "different options (cmd)"},
      {[](auto& j) { j["index"] = 0; }, "two folders are shard 0"},
      {[](auto& j) { j["count"] = 3; }, "different shard counts"}};
  for (const auto& [change, words] : cases) {
    edit(change);
    const auto m = merge();
    EXPECT_EQ(m.rc, exit_code::bad_input) << words;
    EXPECT_NE(m.err.find(words), std::string::npos) << m.err;
    EXPECT_EQ(kg::test::lines(m.err), 1) << m.err;
  }
  std::ofstream(file, std::ios::trunc) << original;
  EXPECT_LE(merge().rc, 1);
}

TEST(shard_cli, gpus_runs_one_shard_per_gpu_and_merges_them) {
  const auto out = fx().base / "local";
  auto args = audit_args(out, {"--gpus", "0,1"});
  std::string line = KG_KERNELGATE_BIN;
  for (const auto& a : args)
    line += " '" + a + "'";
  line += " > " + (fx().base / "local.log").string() + " 2>&1";
  const int status = std::system(line.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_LE(WEXITSTATUS(status), 1) << text_of(fx().base / "local.log");
  const auto whole = fx().base / "whole-local";
  ASSERT_LE(run(audit_args(whole)).rc, 1);
  EXPECT_EQ(verdicts(out / "verdicts.jsonl"), verdicts(whole / "verdicts.jsonl"));
  for (int k : {0, 1}) {
    const auto m = read_shard_manifest(out / "shards" / std::to_string(k));
    EXPECT_EQ(m.spec.count, 2);
    EXPECT_TRUE(fs::exists(out / "shards" / ("shard-" + std::to_string(k) + ".log")));
  }
  const auto log = text_of(fx().base / "local.log");
  EXPECT_NE(log.find("shard 1/2 on GPU 1"), std::string::npos) << log;
  const auto bad = run(audit_args(out, {"--gpus", "0,0"}));
  EXPECT_EQ(bad.rc, exit_code::bad_input);
  EXPECT_NE(bad.err.find("listed twice"), std::string::npos) << bad.err;
}

TEST(slurm_scripts, the_array_runs_one_shard_a_task_and_the_merge_names_every_shard) {
  slurm_options o;
  o.shards = 4;
  o.partition = "gpu";
  o.time = "01:00:00";
  o.command = {"run", "--suite", "nightly", "--out", "/shared/nightly"};
  const auto s = make_slurm_scripts(o, "/opt/kg/kernelgate");
  EXPECT_EQ(s.out, fs::path("/shared/nightly"));
  for (const char* want :
       {"#SBATCH --array=0-3\n", "#SBATCH --gres=gpu:1\n", "#SBATCH --requeue\n",
        "#SBATCH --partition=gpu\n", "#SBATCH --time=01:00:00\n",
        "#SBATCH --output=/shared/nightly/slurm/shard-%a.log\n", "d='/shared/nightly/shards'/$i\n",
        "--shard \"$i/4\" --resume \"$d\"", "--shard \"$i/4\" --out \"$d\"",
        "'/opt/kg/kernelgate' 'run' '--suite' 'nightly'"})
    EXPECT_NE(s.shards.find(want), std::string::npos) << want << "\n" << s.shards;
  EXPECT_EQ(s.shards.find("/shared/nightly' --shard"), std::string::npos); // --out not passed on
  for (const char* want : {"'/opt/kg/kernelgate' merge '/shared/nightly/shards/0' "
                           "'/shared/nightly/shards/1' '/shared/nightly/shards/2' "
                           "'/shared/nightly/shards/3' --logs '/shared/nightly/slurm' --out "
                           "'/shared/nightly'"})
    EXPECT_NE(s.merge.find(want), std::string::npos) << s.merge;
  o.gpus_per_shard = 0;
  EXPECT_EQ(make_slurm_scripts(o, "kg").shards.find("--gres"), std::string::npos);
  // A word with a quote stays one word.
  o.command = {"audit", "checker", "--cmd", "python3 'my checker.py' {candidate}", "--out", "/o"};
  EXPECT_NE(
      make_slurm_scripts(o, "kg").shards.find("'python3 '\\''my checker.py'\\'' {candidate}'"),
      std::string::npos);
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"run", "--suite", "smoke"}, "needs --out"},
      {{"run", "--suite", "smoke", "--out", "/o", "--shard", "0/2"}, "--shard is set by"},
      {{"run", "--suite", "smoke", "--out", "/o", "--gpus", "0"}, "--gpus is set by"},
      {{"eval", "--out", "/o"}, "needs --seed"},
      {{"fastp", "--out", "/o"}, "does not shard"},
      {{"audit", "checker", "--protocol", "all", "--out", "/o"}, "does not shard"},
      {{"run", "--out", "/my out"}, "plain path"}};
  for (const auto& [cmd, words] : bad) {
    o.command = cmd;
    try {
      make_slurm_scripts(o, "kg");
      ADD_FAILURE() << words;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  }
  const auto r = run({"slurm", "submit", "--shards", "2", "--dry-run", "--", "run", "--suite",
                      "smoke", "--out", "/shared/smoke"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("# /shared/smoke/slurm/shards.sbatch"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("#SBATCH --array=0-1"), std::string::npos);
}

TEST(slurm_scripts, scontrol_lines_are_counted_by_state_with_pending_ranges) {
  // `scontrol -o show job 12` as Slurm 22.05 prints an array with one pending range (fields cut).
  const std::string text =
      "JobId=12 ArrayJobId=12 ArrayTaskId=4-7 JobName=kg-run JobState=PENDING Reason=Resources "
      "ExitCode=0:0 StdOut=/o/slurm/shard-%a.log\n"
      "JobId=15 ArrayJobId=12 ArrayTaskId=2 JobName=kg-run JobState=FAILED Reason=NonZeroExitCode "
      "ExitCode=2:0 StdOut=/o/slurm/shard-2.log\n"
      "JobId=14 ArrayJobId=12 ArrayTaskId=1 JobState=RUNNING Reason=None ExitCode=0:0\n"
      "JobId=13 ArrayJobId=12 ArrayTaskId=0 JobState=COMPLETED Reason=None ExitCode=0:0\n";
  const auto t = parse_scontrol_jobs(text);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].count, 4);
  EXPECT_EQ(t[1].state, "FAILED");
  EXPECT_EQ(t[1].exit_code, "2:0");
  EXPECT_EQ(t[1].std_out, "/o/slurm/shard-2.log");
  std::map<std::string, int> by;
  for (const auto& x : t)
    by[slurm_state_class(x.state)] += x.count;
  EXPECT_EQ(
      by, (std::map<std::string, int>{{"done", 1}, {"failed", 1}, {"pending", 4}, {"running", 1}}));
  for (const char* s : {"TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED"})
    EXPECT_EQ(slurm_state_class(s), "failed") << s;
  EXPECT_EQ(parse_scontrol_jobs("slurm_load_jobs error: Invalid job id specified\n").size(), 0u);
  EXPECT_EQ(parse_scontrol_jobs("JobId=3 ArrayTaskId=1,3,5-6 JobState=PENDING\n")[0].count, 4);
}

namespace {

// The suite run the report tests use (tests/fixtures/reports/suite_base.json, 7 workloads).
fs::path fixture_run() {
  return fs::path(KG_SOURCE_DIR) / "tests" / "fixtures" / "reports" / "suite_base.json";
}

// Two shard folders cut from it: the first shard has the even-numbered workloads of the run
// order, the second the odd ones.
fs::path run_shards(const std::string& name, bool second_dies,
                    const nlohmann::json& src = nlohmann::json::parse(text_of(fixture_run()))) {
  const auto base = fx().base / name;
  std::vector<std::string> items;
  for (const auto& r : src["records"])
    items.push_back(r["id"].get<std::string>());
  for (int k = 0; k < 2; ++k) {
    const auto dir = base / std::to_string(k);
    fs::create_directories(dir);
    shard_manifest m;
    m.command = "run";
    m.spec = {k, 2};
    m.items = items;
    m.identity = {{"suite_sha256", src["config"]["suite_sha256"]}, {"filter", ""}};
    m.environment = src["environment"];
    std::string lines;
    auto doc = src;
    doc["records"] = nlohmann::json::array();
    for (std::size_t i = static_cast<std::size_t>(k); i < items.size(); i += 2) {
      m.assigned.push_back(items[i]);
      if (second_dies && k == 1 && i + 2 >= items.size()) break; // its last one never written
      lines += src["records"][i].dump() + "\n";
      doc["records"].push_back(src["records"][i]);
    }
    doc["config"]["shard"] = {{"index", k}, {"count", 2}};
    write_shard_manifest(dir, m);
    std::ofstream(dir / "records.jsonl") << lines;
    if (!(second_dies && k == 1)) std::ofstream(dir / "result.json") << doc.dump(1);
  }
  return base;
}

} // namespace

TEST(shard_cli, run_shards_merge_into_the_run_they_were_cut_from) {
  const auto base = run_shards("runs", false);
  const auto out = fx().base / "runs-merged";
  const auto m =
      run({"merge", (base / "0").string(), (base / "1").string(), "--out", out.string()});
  ASSERT_EQ(m.rc, exit_code::ok) << m.err << m.out;
  const auto src = nlohmann::json::parse(text_of(fixture_run()));
  const auto merged = nlohmann::json::parse(text_of(out / "result.json"));
  EXPECT_EQ(merged["records"], src["records"]); // the run order, every record as measured
  EXPECT_EQ(merged["kind"], "suite_run");
  EXPECT_EQ(merged["summary"]["status"], "complete");
  EXPECT_EQ(merged["summary"]["workloads"], 7);
  EXPECT_EQ(merged["config"]["shards"].size(), 2u);
  EXPECT_TRUE(merged["config"]["shard"].is_null());
  const auto v = run({"validate", (out / "result.json").string()});
  EXPECT_EQ(v.rc, 0) << v.err;
  // The merged run compares against the run it was cut from: every workload the same samples.
  const auto c = run({"compare", fixture_run().string(), out.string()});
  EXPECT_LE(c.rc, 1) << c.err << c.out;
  EXPECT_NE(c.out.find("0 SLOWER, 0 FASTER"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("; 0 missing"), std::string::npos) << c.out;
}

TEST(shard_cli, merged_runs_pair_a_colocated_workload_with_its_solo_twin_from_another_shard) {
  auto src = nlohmann::json::parse(text_of(fixture_run()));
  // The solo step (record 3) goes to the odd shard; a co-located twin put at 4 to the even one.
  ASSERT_EQ(src["records"][3]["id"], "step.decode.solo.b1.ctx2048");
  auto co = src["records"][3];
  co["id"] = "step.decode.colocated.b1.ctx2048";
  co["params"]["placement"] = "colocated";
  co["samples"] = {0.004, 0.003, 0.005}; // mean 0.004
  src["records"].insert(src["records"].begin() + 4, co);
  double solo_mean = 0;
  for (const auto& v : src["records"][3]["samples"])
    solo_mean += v.get<double>();
  solo_mean /= static_cast<double>(src["records"][3]["samples"].size());
  const auto base = run_shards("runs-colocated", false, src);
  const auto out = fx().base / "runs-colocated-merged";
  const auto m =
      run({"merge", (base / "0").string(), (base / "1").string(), "--out", out.string()});
  ASSERT_EQ(m.rc, exit_code::ok) << m.err << m.out;
  const auto merged = nlohmann::json::parse(text_of(out / "result.json"));
  const auto& col = merged["summary"]["colocation"];
  ASSERT_EQ(col["pairs"].size(), 1u) << col;
  EXPECT_EQ(col["pairs"][0]["solo_id"], "step.decode.solo.b1.ctx2048");
  // A time: solo mean over co-located mean.
  EXPECT_NEAR(col["pairs"][0]["fraction"].get<double>(), solo_mean / 0.004, 1e-12);
  EXPECT_TRUE(col["gaps"].empty());
  EXPECT_NE(m.out.find("step.decode.colocated.b1.ctx2048  (step_seconds, placement colocated)"),
            std::string::npos)
      << m.out;
  EXPECT_EQ(run({"validate", (out / "result.json").string()}).rc, 0);
}

TEST(shard_cli, a_run_shard_that_died_leaves_its_last_workload_missing) {
  const auto base = run_shards("runs-died", true);
  const auto out = fx().base / "runs-died-merged";
  const auto m =
      run({"merge", (base / "0").string(), (base / "1").string(), "--out", out.string()});
  EXPECT_EQ(m.rc, exit_code::failures) << m.err;
  const auto merged = nlohmann::json::parse(text_of(out / "result.json"));
  EXPECT_EQ(merged["summary"]["status"], "incomplete");
  ASSERT_EQ(merged["summary"]["missing"].size(), 1u);
  const auto& miss = merged["summary"]["missing"][0];
  const auto src = nlohmann::json::parse(text_of(fixture_run()));
  EXPECT_EQ(miss["id"], src["records"][5]["id"]); // the odd shard's last workload
  EXPECT_EQ(miss["shard"], 1);
  EXPECT_NE(miss["why"].get<std::string>().find("did not finish (2 of its 3"), std::string::npos)
      << miss;
  EXPECT_EQ(merged["records"].size(), 6u);
  EXPECT_EQ(merged["config"]["shards"][1]["state"], "unfinished");
  // compare names it missing rather than calling it slower or the same.
  const auto c = run({"compare", fixture_run().string(), out.string()});
  EXPECT_NE(c.out.find("missing in NEW (1):\n  " + miss["id"].get<std::string>()),
            std::string::npos)
      << c.out;
}

namespace {

// eval on the CPU with the stand-in worker (tests/fake_worker.cpp: zeros for every output, so
// softmax candidates are INCORRECT_NUMERICAL, a marked one crashes): two tasks, one with three
// candidates, one with none (MISSING).
struct eval_fixture {
  fs::path tasks, cands, cache;
};

const eval_fixture& efx() {
  static const eval_fixture f = [] {
    eval_fixture x;
    const auto d = fx().base / "eval";
    const fs::path src = KG_SOURCE_DIR;
    x.tasks = d / "tasks";
    x.cands = d / "cands";
    x.cache = d / "cache";
    fs::create_directories(x.tasks);
    fs::create_directories(x.cands / "softmax_lastdim");
    for (const char* t : {"softmax_lastdim.json", "sum_lastdim.json"})
      fs::copy_file(src / "data/tasks" / t, x.tasks / t);
    const auto kernel = text_of(src / "kernels/tasks/softmax_lastdim.cu");
    std::ofstream(x.cands / "softmax_lastdim" / "a.cu") << kernel;
    std::ofstream(x.cands / "softmax_lastdim" / "b.cu") << "// b\n" << kernel;
    std::ofstream(x.cands / "softmax_lastdim" / "crash.cu")
        << "__attribute__((used)) static const char marker[] = \"KG_FAKE_CRASH\";\n"
        << kernel;
    return x;
  }();
  return f;
}

kg::test::run_result eval(const fs::path& out, std::vector<std::string> extra) {
  const auto& f = efx();
  std::vector<std::string> a = {
      "eval",    "--tasks",        f.tasks.string(), "--candidates", f.cands.string(),
      "--cache", f.cache.string(), "--time",         "no",           "--timeout",
      "10",      "--no-progress",  "--out",          out.string()};
  a.insert(a.end(), extra.begin(), extra.end());
  ::setenv("KERNELGATE_FAKE_DEVICE", "1", 1);
  ::setenv("KERNELGATE_WORKER", KG_FAKE_WORKER_BIN, 1);
  auto r = run(a);
  ::unsetenv("KERNELGATE_FAKE_DEVICE");
  ::unsetenv("KERNELGATE_WORKER");
  return r;
}

std::vector<std::pair<std::string, std::string>> eval_statuses(const fs::path& dir) {
  std::vector<std::pair<std::string, std::string>> v;
  const auto doc = nlohmann::json::parse(text_of(dir / "result.json"));
  for (const auto& r : doc["records"])
    if (r["type"] == "evaluation") v.emplace_back(r["id"], r["status"]);
  return v;
}

} // namespace

TEST(shard_cli, eval_shards_need_a_seed_and_merge_to_the_unsharded_records) {
  const auto no_seed = eval(fx().base / "eval-noseed", {"--shard", "0/2"});
  EXPECT_EQ(no_seed.rc, exit_code::bad_input);
  EXPECT_NE(no_seed.err.find("needs --seed"), std::string::npos) << no_seed.err;
  const auto whole = fx().base / "eval-whole";
  const auto w = eval(whole, {"--seed", "7"});
  ASSERT_EQ(w.rc, exit_code::failures) << w.err;
  const auto expected = eval_statuses(whole);
  ASSERT_EQ(expected.size(), 4u) // a, b, crash; sum_lastdim
      << nlohmann::json::parse(text_of(whole / "result.json"))["summary"].dump() << w.out;
  std::vector<std::string> m = {"merge"};
  for (int k = 0; k < 2; ++k) {
    const auto dir = fx().base / "eval-shards" / std::to_string(k);
    const auto s = eval(dir, {"--seed", "7", "--shard", std::to_string(k) + "/2"});
    ASSERT_LE(s.rc, 1) << s.err;
    m.push_back(dir.string());
  }
  const auto out = fx().base / "eval-merged";
  m.insert(m.end(), {"--out", out.string()});
  const auto r = run(m);
  EXPECT_EQ(r.rc, exit_code::failures) << r.err; // not every pair PASSED
  EXPECT_EQ(eval_statuses(out), expected);
  const auto doc = nlohmann::json::parse(text_of(out / "result.json"));
  EXPECT_EQ(doc["summary"]["status"], "complete");
  EXPECT_EQ(doc["summary"]["seed"]["value"], 7);
  EXPECT_EQ(doc["summary"]["by_status"],
            nlohmann::json::parse(text_of(whole / "result.json"))["summary"]["by_status"]);
  EXPECT_EQ(run({"validate", (out / "result.json").string()}).rc, 0);
}

TEST(shard_cli, a_resumed_eval_keeps_its_recorded_pairs) {
  const auto dir = fx().base / "eval-resume";
  ASSERT_LE(eval(dir, {"--seed", "9"}).rc, 1);
  const auto full = eval_statuses(dir);
  ASSERT_EQ(full.size(), 4u);
  // As a kill leaves it: the first two records, no result.json.
  const auto recs = jsonl(dir / "records.jsonl");
  {
    std::ofstream f(dir / "records.jsonl", std::ios::trunc);
    f << recs[0].dump() << "\n" << recs[1].dump() << "\n";
  }
  fs::remove(dir / "result.json");
  const auto r = eval(dir, {"--seed", "9", "--resume", dir.string()});
  ASSERT_LE(r.rc, 1) << r.err;
  EXPECT_NE(r.err.find("2 pairs kept"), std::string::npos) << r.err;
  EXPECT_EQ(eval_statuses(dir), full);
  const auto other = eval(dir, {"--seed", "10", "--resume", dir.string()});
  EXPECT_EQ(other.rc, exit_code::bad_input);
  EXPECT_NE(other.err.find("a different evaluation"), std::string::npos) << other.err;
}

TEST(shard_cli, a_resumed_eval_runs_the_pairs_an_interruption_left_unevaluated) {
  // SIGINT/SIGTERM (the flag they set, raised before the run) leaves every pair "not evaluated";
  // a resume must evaluate those, not keep them as recorded.
  const auto whole = fx().base / "eval-interrupt-whole";
  ASSERT_LE(eval(whole, {"--seed", "11"}).rc, 1);
  const auto dir = fx().base / "eval-interrupted";
  kg::request_stop();
  const auto stopped = eval(dir, {"--seed", "11"});
  kg::clear_stop();
  EXPECT_EQ(stopped.rc, exit_code::interrupted) << stopped.err;
  const auto r = eval(dir, {"--seed", "11", "--resume", dir.string()});
  ASSERT_LE(r.rc, 1) << r.err;
  EXPECT_EQ(eval_statuses(dir), eval_statuses(whole));
}
