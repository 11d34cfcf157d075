// `kernelgate audit checker --cmd` end to end with small shell checkers (accept-all, reject-all,
// one that crashes, one that hangs, and one that compares the candidate with the original): the
// verdicts, scores, false rejections and outputs each must give, computed from the fixture by
// hand.
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/sha256.h"
#include "cli_run.h"
#include "mutants/kill_matrix.h"
#include "mutants/mutant_catalog.h"
#include "reports/json_schema.h"
#include "scratch_dir.h"
#include "suite/audit_checker_parts.h"
#include "suite/exit_codes.h"
#include "timing/interrupt.h"

using namespace kg;
using kg::test::lines;
using kg::test::run;
namespace fs = std::filesystem;

namespace {

const std::string kernel = "__global__ void twice(const float* x, float* y, int n) {\n"
                           "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                           "  if (i < n) y[i] = x[i] * 2.0f;\n"
                           "}\n";

struct fixture {
  fs::path root, catalog, witnesses;
  std::vector<mutant> mutants;
  int witnessed = 0;
};

// One task ("twice") with its task file and catalog; every other mutant witnessed, the rest
// split between unwitnessed and equivalent (never sent to the checker).
const fixture& fx() {
  static const fixture f = [] {
    fixture x;
    const auto base = kg::test::scratch_dir("audit-checker");
    x.root = base / "root";
    x.catalog = base / "catalog";
    x.witnesses = base / "witnesses.jsonl";
    fs::create_directories(x.root / "k");
    fs::create_directories(x.root / "data" / "tasks");
    std::ofstream(x.root / "k" / "twice.cu") << kernel;
    std::ofstream(x.root / "data" / "tasks" / "twice.json") << "{\"id\": \"twice\"}\n";
    const auto g = run({"mutants", "generate", "--root", x.root.string(), "--kernels", "k/*.cu",
                        "--out", x.catalog.string()});
    EXPECT_EQ(g.rc, exit_code::ok) << g.err;
    std::ifstream in(x.catalog / "catalog.jsonl");
    for (std::string line; std::getline(in, line);)
      x.mutants.push_back(mutant_from_json(nlohmann::json::parse(line)));
    std::ofstream w(x.witnesses);
    for (std::size_t i = 0; i < x.mutants.size(); ++i) {
      const char* s = i % 2 == 0 ? "witnessed" : i % 4 == 1 ? "unwitnessed" : "equivalent";
      x.witnessed += i % 2 == 0;
      w << nlohmann::json{{"id", x.mutants[i].id}, {"status", s}}.dump() << "\n";
    }
    return x;
  }();
  return f;
}

struct audit_run {
  kg::test::run_result r;
  nlohmann::json summary;
  fs::path out;
};

audit_run audit(const std::string& name, const std::string& cmd,
                std::vector<std::string> extra = {}) {
  const auto& f = fx();
  audit_run a;
  a.out = kg::test::scratch_dir("audit-checker") / ("out-" + name);
  std::vector<std::string> args = {
      "audit",     "checker",          "--cmd",       cmd,
      "--catalog", f.catalog.string(), "--witnesses", f.witnesses.string(),
      "--root",    f.root.string(),    "--jobs",      "2",
      "--out",     a.out.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  a.r = run(args);
  if (fs::exists(a.out / "summary.json"))
    a.summary = nlohmann::json::parse(std::ifstream(a.out / "summary.json"));
  return a;
}

} // namespace

TEST(audit_checker_cli, accept_all_lets_every_witnessed_mutant_through) {
  ASSERT_GE(fx().mutants.size(), 6u);
  const auto a = audit("accept", "exit 0 # {candidate}");
  ASSERT_EQ(a.r.rc, exit_code::ok) << a.r.err << a.r.out;
  const auto& s = a.summary["score"];
  EXPECT_EQ(s["intended"], fx().witnessed);
  EXPECT_EQ(s["survived"], fx().witnessed);
  EXPECT_EQ(s["killed"], 0);
  EXPECT_EQ(s["escape_rate"], 1.0);
  EXPECT_EQ(a.summary["calls"], fx().witnessed + 1); // + the control
  EXPECT_TRUE(a.summary["valid"].get<bool>());
  EXPECT_NE(a.r.out.find("every correct kernel accepted"), std::string::npos) << a.r.out;
  // Every call streamed, the matrix reloads, the report is in the viewer's format.
  std::ifstream v(a.out / "verdicts.jsonl");
  int n = 0;
  for (std::string line; std::getline(v, line);)
    ++n;
  EXPECT_EQ(n, fx().witnessed + 1);
  const auto km =
      kill_matrix::from_json(nlohmann::json::parse(std::ifstream(a.out / "kill_matrix.json")));
  EXPECT_EQ(km.score("cmd").survived, fx().witnessed);
  const auto schema = nlohmann::json::parse(
      std::ifstream(std::string(KG_SOURCE_DIR) + "/data/schema/mutation-report.schema.json"));
  const auto report = nlohmann::json::parse(std::ifstream(a.out / "report.mutation.json"));
  EXPECT_TRUE(validate_json(schema, report).empty());
  EXPECT_FALSE(fs::exists(a.out / "work"));
}

TEST(audit_checker_cli, reject_all_kills_everything_and_is_invalid) {
  const auto a = audit("reject", "exit 1 # {candidate}");
  EXPECT_EQ(a.r.rc, exit_code::failures) << a.r.err;
  EXPECT_EQ(a.summary["score"]["killed"], fx().witnessed);
  EXPECT_EQ(a.summary["score"]["mutation_score"], 1.0);
  ASSERT_EQ(a.summary["false_rejections"].size(), 1u);
  EXPECT_EQ(a.summary["false_rejections"][0]["control"], "control:k/twice.cu");
  EXPECT_FALSE(a.summary["valid"].get<bool>());
  EXPECT_NE(a.r.out.find("the checker is invalid for twice"), std::string::npos) << a.r.out;
}

TEST(audit_checker_cli, a_crashing_or_hanging_checker_is_never_a_kill) {
  const auto crash = audit("crash", "kill -SEGV $$ # {candidate}");
  EXPECT_EQ(crash.r.rc, exit_code::failures) << crash.r.err; // the control was not accepted
  EXPECT_EQ(crash.summary["score"]["killed"], 0);
  EXPECT_EQ(crash.summary["score"]["aligned"], 0);
  EXPECT_EQ(crash.summary["score"]["excluded"]["checker_error"], fx().witnessed);
  EXPECT_TRUE(fs::exists(crash.out / "logs")); // the error calls' logs are kept
  const auto hang = audit("hang", "sleep 20 # {candidate}", {"--timeout", "0.3"});
  EXPECT_EQ(hang.r.rc, exit_code::failures);
  EXPECT_EQ(hang.summary["score"]["excluded"]["timeout"], fx().witnessed);
  EXPECT_EQ(hang.summary["score"]["killed"], 0);
}

TEST(audit_checker_cli, a_checker_that_compares_with_the_original_kills_every_mutant) {
  // Accepts exactly the original's bytes: every witnessed mutant killed, the control accepted.
  const auto original = (fx().root / "k" / "twice.cu").string();
  const auto a = audit("exact", "cmp -s {candidate} '" + original + "'");
  ASSERT_EQ(a.r.rc, exit_code::ok) << a.r.err << a.r.out;
  EXPECT_EQ(a.summary["score"]["killed"], fx().witnessed);
  EXPECT_EQ(a.summary["score"]["survived"], 0);
  EXPECT_TRUE(a.summary["false_rejections"].empty());
  EXPECT_TRUE(a.summary["escapes"].empty());
}

TEST(audit_checker_cli, a_checker_ended_by_the_signal_that_stops_us_gives_no_verdict) {
  // As under Slurm's requeue: SIGTERM reaches the checker first and kernelgate (this process)
  // 0.3 s later (the 0.1 s lets setsid leave the group, which dies with the checker). The checker's
  // death is no verdict; a resume makes that call again (the same command, which accepts once
  // `resumed` exists).
  const auto resumed_flag = kg::test::scratch_dir("audit-checker") / "resumed";
  fs::remove(resumed_flag);
  const std::string cmd = "[ -e '" + resumed_flag.string() +
                          "' ] && exit 0; p=$PPID; setsid sh -c \"sleep 0.4; kill -TERM $p\" "
                          "</dev/null >/dev/null 2>&1 & sleep 0.1; kill -TERM $$ # {candidate}";
  struct sigaction old_int = {};
  struct sigaction old_term = {};
  sigaction(SIGINT, nullptr, &old_int);
  sigaction(SIGTERM, nullptr, &old_term);
  install_interrupt_handlers();
  const auto stopped = audit("terminated", cmd, {"--jobs", "1"});
  const bool was_stopped = stop_requested();
  clear_stop();
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  ASSERT_TRUE(was_stopped) << "the delayed SIGTERM never arrived";
  EXPECT_EQ(stopped.r.rc, exit_code::interrupted) << stopped.r.err;
  EXPECT_EQ(fs::file_size(stopped.out / "verdicts.jsonl"), 0u);
  // The matrix of what was judged (nothing: every row without a verdict), so `audit agreement`
  // can read an interrupted folder; no summary, which is the finished audit's.
  {
    std::ifstream in(stopped.out / "kill_matrix.json");
    ASSERT_TRUE(in) << stopped.r.err;
    const auto km = kill_matrix::from_json(nlohmann::json::parse(in));
    int judged_rows = 0; // the witnessed mutants and the control
    for (const auto& r : km.rows()) {
      judged_rows += r.control || r.status == witness_status::witnessed;
      EXPECT_EQ(km.at(r.id, "cmd"), kill_verdict::missing) << r.id;
    }
    EXPECT_EQ(judged_rows, fx().witnessed + 1);
    EXPECT_FALSE(fs::exists(stopped.out / "summary.json"));
    EXPECT_NE(stopped.r.err.find("their kill matrix in"), std::string::npos) << stopped.r.err;
  }
  std::ofstream(resumed_flag) << "";
  const auto resumed = audit("terminated", cmd, {"--jobs", "1", "--resume", stopped.out.string()});
  ASSERT_EQ(resumed.r.rc, exit_code::ok) << resumed.r.err;
  EXPECT_EQ(resumed.summary["calls"], fx().witnessed + 1);
  EXPECT_EQ(resumed.summary["score"]["survived"], fx().witnessed);
}

TEST(audit_checker_cli, bad_input_is_one_line_and_exit_2_before_any_call) {
  const auto& f = fx();
  const auto out = kg::test::scratch_dir("audit-checker") / "bad-out";
  const auto bad_witness = kg::test::scratch_dir("audit-checker") / "bad-witness.jsonl";
  std::ofstream(bad_witness) << "{\"id\": \"0123456789abcdef\", \"status\": \"witnessed\"}\n";
  const auto bad_status = kg::test::scratch_dir("audit-checker") / "bad-status.jsonl";
  std::ofstream(bad_status) << "{\"id\": \"" << f.mutants[0].id << "\", \"status\": \"maybe\"}\n";
  struct bad_case {
    std::vector<std::string> args;
    std::string says;
  };
  for (const auto& c : std::vector<bad_case>{
           {{"--cmd", "check {task}"}, "never names {candidate}"},
           {{"--cmd", "check {candidate} {shape}"}, "unknown placeholder {shape}"},
           {{"--witnesses", bad_witness.string()}, "which the catalog lacks"},
           {{"--witnesses", bad_status.string()}, "unknown witness status"},
           {{"--catalog", (out / "none").string()}, "cannot read"},
           {{"--tasks-dir", (out / "none").string()}, "has no task file"},
       }) {
    std::vector<std::string> args = {
        "audit",     "checker",          "--cmd",       "exit 0 # {candidate}",
        "--catalog", f.catalog.string(), "--witnesses", f.witnesses.string(),
        "--root",    f.root.string(),    "--out",       out.string()};
    // Later options win: the case's value replaces the good one.
    args.insert(args.end(), c.args.begin(), c.args.end());
    const auto r = run(args);
    EXPECT_EQ(r.rc, exit_code::bad_input) << c.says << ": " << r.err;
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out / "verdicts.jsonl")) << c.says;
  }
}

TEST(audit_checker_cli, agreement_compares_two_audited_checkers_row_by_row) {
  // Accept-all against the exact checker: both accept the control; on each witnessed mutant the
  // exact one kills and accept-all lets it through. The crashing checker gives no verdict at all.
  const auto original = (fx().root / "k" / "twice.cu").string();
  const auto exact = audit("agree-exact", "cmp -s {candidate} '" + original + "'");
  const auto accept = audit("agree-accept", "exit 0 # {candidate}");
  const auto crash = audit("agree-crash", "kill -SEGV $$ # {candidate}");
  const int w = fx().witnessed;
  const auto json = accept.out / "agreement.json";
  auto r =
      run({"audit", "agreement", exact.out.string(), accept.out.string(), "--json", json.string()});
  ASSERT_EQ(r.rc, exit_code::ok) << r.err;
  std::ifstream in(json);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["compared"], w + 1);
  EXPECT_EQ(j["compared_controls"], 1);
  EXPECT_EQ(j["same"], 1);
  EXPECT_EQ(j["killed_only_by"]["cmd"], w); // (both columns are "cmd": the first's count wins)
  ASSERT_EQ(j["differences"].size(), static_cast<std::size_t>(w));
  EXPECT_EQ(j["differences"][0]["first"], "killed");
  EXPECT_EQ(j["differences"][0]["second"], "survived");
  EXPECT_NEAR(j["agreement"].get<double>(), 1.0 / (w + 1), 1e-12);
  EXPECT_NE(r.out.find("same verdict: 1 of " + std::to_string(w + 1)), std::string::npos) << r.out;
  // The same checker against itself agrees everywhere; a bar above what is measured fails.
  r = run({"audit", "agreement", exact.out.string(), (exact.out / "kill_matrix.json").string(),
           "--min-agreement", "1"});
  EXPECT_EQ(r.rc, exit_code::ok) << r.out;
  EXPECT_NE(r.out.find("different: 0"), std::string::npos) << r.out;
  r = run(
      {"audit", "agreement", exact.out.string(), accept.out.string(), "--min-agreement", "0.99"});
  EXPECT_EQ(r.rc, exit_code::failures) << r.out;
  // No verdicts on one side: every row left out, nothing compared.
  r = run({"audit", "agreement", accept.out.string(), crash.out.string(), "--json", json.string()});
  ASSERT_EQ(r.rc, exit_code::ok) << r.err;
  std::ifstream in2(json);
  const auto k = nlohmann::json::parse(in2);
  EXPECT_EQ(k["compared"], 0);
  EXPECT_EQ(k["left_out"]["no_verdict_second"], w + 1);
  // Bad input: one line, exit 2.
  for (const auto& args : std::vector<std::vector<std::string>>{
           {exact.out.string(), (exact.out / "none").string()},
           {exact.out.string(), accept.out.string(), "--checkers", "kernelbench"},
           {exact.out.string(), (exact.out / "summary.json").string()},
       }) {
    std::vector<std::string> a = {"audit", "agreement"};
    a.insert(a.end(), args.begin(), args.end());
    r = run(a);
    EXPECT_EQ(r.rc, exit_code::bad_input) << r.out;
    EXPECT_EQ(lines(r.err), 1) << r.err;
  }
}

TEST(audit_checker_cli, takes_a_protocol_audits_witness_file_with_its_control_lines) {
  // `audit checker --protocol` writes a line per control too ("control:<path>", status
  // "control" or a witness status): --cmd takes that file as it is, controls aside.
  const auto& f = fx();
  const auto file = kg::test::scratch_dir("audit-checker") / "with-controls.jsonl";
  {
    std::ofstream w(file);
    w << nlohmann::json{{"id", "control:k/twice.cu"}, {"status", "witnessed"}}.dump() << "\n";
    std::ifstream in(f.witnesses);
    w << in.rdbuf();
  }
  const auto a = audit("with-controls", "exit 0 # {candidate}", {"--witnesses", file.string()});
  ASSERT_EQ(a.r.rc, exit_code::ok) << a.r.err;
  EXPECT_EQ(a.summary["score"]["intended"], f.witnessed);
}

// The sample's shares by hand: 6, 3 and 1 witnessed mutants of tasks a, b, c, a sample of 5.
// Exact shares 3, 1.5 and 0.5: a gets 3, b and c one each of their whole parts (3 + 1 + 0), and the
// one left goes to the largest remainder, a tie of b and c that the task name breaks (b). Within
// a task: the ids whose SHA-256 of "<seed>:<id>" is least.
TEST(audit_checker_cli, a_sample_is_stratified_by_task_and_drawn_by_hash) {
  std::vector<std::pair<std::string, std::string>> ids;
  for (int i = 0; i < 6; ++i)
    ids.push_back({"a", "a" + std::to_string(i)});
  for (int i = 0; i < 3; ++i)
    ids.push_back({"b", "b" + std::to_string(i)});
  ids.push_back({"c", "c0"});
  const std::uint64_t seed = 7;
  const auto chosen = sample_witnessed(ids, 5, seed);
  std::map<std::string, std::set<std::string>> by_task;
  for (const auto& id : chosen)
    by_task[id.substr(0, 1)].insert(id);
  EXPECT_EQ(by_task["a"].size(), 3u);
  EXPECT_EQ(by_task["b"].size(), 2u);
  EXPECT_EQ(by_task.count("c"), 0u);
  for (const auto& [task, n] : std::map<std::string, int>{{"a", 6}, {"b", 3}}) {
    std::vector<std::pair<std::string, std::string>> hashed;
    for (int i = 0; i < n; ++i) {
      const auto id = task + std::to_string(i);
      hashed.push_back({sha256_hex(std::to_string(seed) + ":" + id), id});
    }
    std::sort(hashed.begin(), hashed.end());
    std::set<std::string> least;
    for (std::size_t k = 0; k < by_task[task].size(); ++k)
      least.insert(hashed[k].second);
    EXPECT_EQ(by_task[task], least) << task;
  }
  EXPECT_EQ(sample_witnessed(ids, 5, seed), chosen);     // the same on every call
  EXPECT_EQ(sample_witnessed(ids, 0, seed).size(), 10u); // 0: every one
  EXPECT_EQ(sample_witnessed(ids, 40, seed).size(), 10u);
}

// --sample N calls N witnessed mutants and every control; the others are missing verdicts (the
// aligned denominator), and the summary says what was sampled.
TEST(audit_checker_cli, a_sampled_audit_calls_only_its_sample) {
  ASSERT_GE(fx().witnessed, 3);
  const auto a = audit("sample", "exit 0 # {candidate}", {"--sample", "2", "--sample-seed", "3"});
  ASSERT_EQ(a.r.rc, exit_code::ok) << a.r.err << a.r.out;
  EXPECT_EQ(a.summary["calls"], 3); // 2 mutants + the control
  EXPECT_EQ(a.summary["sample"]["called"], 2);
  EXPECT_EQ(a.summary["sample"]["witnessed"], fx().witnessed);
  EXPECT_EQ(a.summary["sample"]["seed"], 3);
  EXPECT_EQ(a.summary["score"]["intended"], fx().witnessed);
  EXPECT_EQ(a.summary["score"]["aligned"], 2);
  EXPECT_EQ(a.summary["score"]["survived"], 2);
  EXPECT_EQ(a.summary["score"]["excluded"]["missing"], fx().witnessed - 2);
  EXPECT_NE(a.r.out.find("a sample: 2 of"), std::string::npos) << a.r.out;
  const auto bad = run({"audit", "checker", "--protocol", "strict", "--sample", "2", "--catalog",
                        fx().catalog.string(), "--out",
                        (kg::test::scratch_dir("audit-checker") / "bad-sample").string()});
  EXPECT_EQ(bad.rc, exit_code::bad_input);
  EXPECT_NE(bad.err.find("--sample is for --cmd"), std::string::npos) << bad.err;
}
