// `kernelgate history` and `compare --baseline-from` through the CLI, in-process: runs written as
// result.json folders under the scratch folder, appended with `history --append`, then queried;
// exit codes and one-line errors for absent databases, bad dates and unknown workloads.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "history_docs.h"
#include "scratch_dir.h"
#include "suite/exit_codes.h"

using namespace kg;
using namespace kg::test;
namespace fs = std::filesystem;

namespace {

fs::path write_run(const std::string& name, const json& doc) {
  const auto dir = scratch_dir("history-cli") / name;
  fs::create_directories(dir);
  std::ofstream(dir / "result.json") << doc.dump(1);
  return dir;
}

json kernel_run(const std::string& created, const std::string& rev, double seconds) {
  return suite_run("nightly", created, rev, false, {workload("kernel.x", around(seconds))});
}

TEST(history_cli, appended_runs_are_queried_and_compared_against) {
  const auto db = (scratch_dir("history-cli") / "runs.sqlite").string();
  const auto a = write_run("a", kernel_run("2026-12-01T00:00:00Z", "aaaa", 10e-6));
  const auto b = write_run("b", kernel_run("2026-12-02T00:00:00Z", "bbbb", 15e-6));
  const auto c = write_run("c", kernel_run("2026-12-03T00:00:00Z", "cccc", 15e-6));
  auto r = run({"history", db, "--append", a.string()});
  ASSERT_EQ(r.rc, exit_code::ok) << r.err;
  EXPECT_NE(r.out.find("Appended run 1 (1 records)"), std::string::npos) << r.out;
  r = run({"history", db, "--append", (b / "result.json").string()});
  ASSERT_EQ(r.rc, exit_code::ok) << r.err;
  EXPECT_NE(r.out.find("1 SLOWER than run 1"), std::string::npos) << r.out;

  r = run({"history", db, "--workload", "kernel.x", "--json"});
  ASSERT_EQ(r.rc, exit_code::ok) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["runs"], 2);
  ASSERT_EQ(j["workloads"].size(), 1u);
  EXPECT_EQ(j["workloads"][0]["points"].size(), 2u);
  EXPECT_EQ(j["workloads"][0]["points"][1]["decision"], "SLOWER");
  EXPECT_EQ(j["workloads"][0]["slower_runs"], json({2}));
  EXPECT_EQ(j["builds"].size(), 2u);

  r = run({"history", db, "--workload", "kernel.x"});
  ASSERT_EQ(r.rc, exit_code::ok) << r.err;
  EXPECT_NE(r.out.find("10 us"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("SLOWER 1.5 ["), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("SLOWER than the previous run (1):"), std::string::npos) << r.out;
  r = run({"history", db, "--since", "2026-12-02"});
  ASSERT_EQ(r.rc, exit_code::ok) << r.err;
  EXPECT_NE(r.out.find("builds (1):\n  bbbb clean, 1 run"), std::string::npos) << r.out;

  // NEW (run c, as slow as b): against the last passing run (b) the same; against aaaa slower.
  r = run({"compare", "--baseline-from", db, c.string()});
  EXPECT_EQ(r.rc, exit_code::ok) << r.out << r.err;
  EXPECT_NE(r.out.find("BASE: " + db + "#run2"), std::string::npos) << r.out;
  r = run({"compare", "--baseline-from", db, "--baseline-rev", "aaaa", c.string(), "--json"});
  EXPECT_EQ(r.rc, exit_code::failures) << r.out << r.err;
  EXPECT_EQ(json::parse(r.out)["summary"]["counts"]["SLOWER"], 1);
}

TEST(history_cli, bad_input_is_exit_2_with_one_line) {
  const auto dir = scratch_dir("history-cli");
  const auto absent = (dir / "absent.sqlite").string();
  const auto db = (dir / "bad-input.sqlite").string();
  const auto a = write_run("bad-a", kernel_run("2026-12-01T00:00:00Z", "aaaa", 10e-6));
  ASSERT_EQ(run({"history", db, "--append", a.string()}).rc, exit_code::ok);
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"history", absent}, "does not exist"},
      {{"history", db, "--since", "last week"}, "is not a UTC date"},
      {{"history", db, "--workload", "no.such"}, "holds workload 'no.such'"},
      {{"history", db, "--append", (dir / "nothing").string()}, "cannot append the run"},
      {{"compare", "--baseline-from", absent, a.string()}, "does not exist"},
      {{"compare", "--baseline-from", db, "--baseline-rev", "ffff", a.string()},
       "at revision 'ffff'"},
      {{"compare", "--baseline-rev", "aaaa", a.string()}, "--baseline-rev needs --baseline-from"},
      {{"compare", "--baseline-from", db, a.string(), a.string()}, "give NEW only"},
      {{"compare", a.string()}, "BASE and NEW are required"},
  };
  for (const auto& [args, expected] : cases) {
    const auto r = run(args);
    EXPECT_EQ(r.rc, exit_code::bad_input) << args[0] << " " << args[1] << ": " << r.err;
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(absent));
}

// The hook itself, on the one command that runs without a GPU: the CPU audit appends its result
// once written; a database that cannot take it stops the audit before it runs.
TEST(history_cli, an_audit_given_history_appends_its_run_and_a_bad_database_stops_it_first) {
  const auto dir = scratch_dir("history-cli");
  const auto db = (dir / "audits.sqlite").string();
  auto r = run({"audit", "layernorm-affine", "--backend", "cpu", "--out", (dir / "audit").string(),
                "--history", db});
  ASSERT_EQ(r.rc, exit_code::ok) << r.err;
  EXPECT_NE(r.out.find("Appended run 1 ("), std::string::npos) << r.out;
  const auto written = json::parse(slurp(dir / "audit" / "result.json"));
  r = run({"history", db, "--json"});
  ASSERT_EQ(r.rc, exit_code::ok) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["runs"], 1);
  EXPECT_EQ(j["workloads"].size(), written["records"].size()); // one row per record
  const auto& first = j["workloads"][0]["points"][0];
  EXPECT_EQ(first["kind"], "audit");
  EXPECT_EQ(first["series"], "layernorm-affine");
  EXPECT_TRUE(first["verdict"] == "accepted" || first["verdict"] == "rejected") << first;

  const auto junk = dir / "junk.sqlite";
  std::ofstream(junk) << "not a database at all, just some text to fill a page\n";
  r = run({"audit", "layernorm-affine", "--backend", "cpu", "--out", (dir / "audit2").string(),
           "--history", junk.string()});
  EXPECT_EQ(r.rc, exit_code::bad_input);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("file is not a database"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "audit2" / "result.json")); // nothing ran
}

} // namespace
