// The run history (reports/run_history.h) on hand-made runs: append and query with expectations
// worked out by hand, a database written by schema version 1 migrated forward, two processes
// appending at once, bad databases, --since, and the baseline `compare --baseline-from` picks.
// Everything is written under the test's scratch folder.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "history_docs.h"
#include "reports/result_writer.h"
#include "reports/run_history.h"
#include "scratch_dir.h"

using namespace kg;
using namespace kg::test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// The schema as version 1 wrote it, kept here verbatim: the test builds a database the previous
// release would have left behind, not one made by the code under test.
constexpr const char* schema_v1_sql =
    "CREATE TABLE schema_version (version INTEGER NOT NULL);"
    "INSERT INTO schema_version VALUES (1);"
    "CREATE TABLE runs (run_id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL,"
    " series TEXT NOT NULL, created TEXT NOT NULL, git_revision TEXT, git_dirty INTEGER,"
    " environment TEXT NOT NULL, config TEXT NOT NULL, summary TEXT NOT NULL);"
    "CREATE TABLE records (run_id INTEGER NOT NULL REFERENCES runs(run_id), seq INTEGER NOT NULL,"
    " id TEXT NOT NULL, metric TEXT, unit TEXT, estimate REAL, ci_lo REAL, ci_hi REAL,"
    " samples TEXT, PRIMARY KEY (run_id, seq));";

fs::path fresh_db(const std::string& name) {
  const auto p = test::scratch_dir("history") / (name + ".sqlite");
  for (const char* suffix : {"", "-wal", "-shm"})
    fs::remove(p.string() + suffix);
  return p;
}

history_filter only(const std::string& id) {
  history_filter f;
  f.workload = id;
  return f;
}

history_filter since_filter(const std::string& since) {
  history_filter f;
  f.since = checked_since(since);
  return f;
}

history_append_options quick() {
  history_append_options o;
  o.compare.resamples = 2000;
  return o;
}

void exec(sqlite3* db, const char* sql) {
  char* msg = nullptr;
  ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, &msg), SQLITE_OK) << (msg ? msg : "");
}

TEST(run_history, append_and_query_round_trip) {
  const auto file = fresh_db("round_trip");
  auto h = run_history::open_for_append(file);
  EXPECT_EQ(h.schema_version(), 2);
  // Run 1: the kernel at 10 us, serving at 1000 tokens/s. Run 2: the kernel 1.5x slower (every
  // sample times 1.5: ratio of medians exactly 1.5, far past the 2% minimum effect with a 4%
  // spread), serving unchanged (the same samples: ratio 1, interval around it). Run 3 (another
  // build): the kernel back to 10 us, FASTER by 1/1.5.
  const auto r1 = h.append(suite_run("nightly", "2026-12-01T00:00:00Z", "aaaa1111", false,
                                     {workload("kernel.x", around(10e-6)),
                                      workload("serving.y", around(1000), "higher")}),
                           quick());
  EXPECT_EQ(r1.run_id, 1);
  EXPECT_EQ(r1.records, 2u);
  EXPECT_FALSE(r1.previous_run);
  const auto r2 = h.append(suite_run("nightly", "2026-12-02T00:00:00Z", "aaaa1111", false,
                                     {workload("kernel.x", around(15e-6)),
                                      workload("serving.y", around(1000), "higher")}),
                           quick());
  EXPECT_EQ(r2.previous_run, 1);
  EXPECT_EQ(r2.slower, 1u);
  h.append(suite_run("nightly", "2026-12-03T00:00:00Z", "bbbb2222", true,
                     {workload("kernel.x", around(10e-6)),
                      workload("serving.y", around(1000), "higher")}),
           quick());
  EXPECT_EQ(h.run_count(), 3u);

  const auto all = h.query({});
  ASSERT_EQ(all.workloads.size(), 2u);
  EXPECT_EQ(all.workloads[0].id, "kernel.x"); // ordered by id
  EXPECT_EQ(all.workloads[1].id, "serving.y");
  const auto& k = all.workloads[0];
  EXPECT_EQ(k.unit, "s");
  EXPECT_EQ(k.direction, "lower");
  ASSERT_EQ(k.points.size(), 3u);
  EXPECT_DOUBLE_EQ(*k.points[0].estimate, 10e-6);
  EXPECT_DOUBLE_EQ(*k.points[1].estimate, 15e-6);
  EXPECT_DOUBLE_EQ(*k.points[0].ci_lo, 10e-6 * 0.98);
  EXPECT_DOUBLE_EQ(*k.points[0].ci_hi, 10e-6 * 1.02);
  EXPECT_EQ(k.points[0].decision, "");
  EXPECT_EQ(k.points[1].decision, "SLOWER");
  EXPECT_NEAR(*k.points[1].ratio, 1.5, 1e-12);
  EXPECT_LE(*k.points[1].ratio_lo, 1.5);
  EXPECT_GE(*k.points[1].ratio_hi, 1.5);
  EXPECT_EQ(k.points[1].compared_with, 1);
  EXPECT_EQ(k.points[2].decision, "FASTER");
  EXPECT_NEAR(*k.points[2].ratio, 1 / 1.5, 1e-12);
  EXPECT_EQ(k.points[2].revision, "bbbb2222");
  EXPECT_EQ(k.points[2].dirty, true);
  EXPECT_EQ(k.points[2].gates_pass, true);
  const auto& s = all.workloads[1];
  EXPECT_EQ(s.direction, "higher");
  EXPECT_EQ(s.points[1].decision, "SAME");
  EXPECT_NEAR(*s.points[1].ratio, 1.0, 1e-12);
  // Two builds: aaaa1111 clean (runs 1, 2), bbbb2222 dirty (run 3), ordered by first run.
  ASSERT_EQ(all.builds.size(), 2u);
  EXPECT_EQ(all.builds[0].revision, "aaaa1111");
  EXPECT_EQ(all.builds[0].runs, 2u);
  EXPECT_EQ(all.builds[0].dirty, false);
  EXPECT_EQ(all.builds[0].first, "2026-12-01T00:00:00Z");
  EXPECT_EQ(all.builds[0].last, "2026-12-02T00:00:00Z");
  EXPECT_EQ(all.builds[1].revision, "bbbb2222");
  EXPECT_EQ(all.builds[1].runs, 1u);

  const auto one = h.query(only("kernel.x"));
  ASSERT_EQ(one.workloads.size(), 1u);
  EXPECT_EQ(one.workloads[0].points.size(), 3u);
  const auto j = history_report_json(one);
  EXPECT_EQ(j["workloads"][0]["slower_runs"], json({2}));
  EXPECT_EQ(j["workloads"][0]["points"][1]["ratio_ci95"].size(), 2u);
  EXPECT_TRUE(h.query(only("no.such")).workloads.empty());
}

TEST(run_history, eval_and_audit_records_keep_a_generic_summary) {
  const auto file = fresh_db("generic");
  auto h = run_history::open_for_append(file);
  const json eval = {{"kind", "eval"},
                     {"created", "2026-12-01T00:00:00Z"},
                     {"environment", json::object()},
                     {"config", {{"tasks", "data/tasks/*.json"}}},
                     {"records",
                      {{{"type", "evaluation"},
                        {"id", "eval/softmax/a"},
                        {"status", "PASSED"},
                        {"speedup", 1.25},
                        {"speedup_ci95", {1.2, 1.3}}},
                       {{"type", "evaluation"}, {"id", "eval/softmax/b"}, {"status", "TIMEOUT"}}}},
                     {"summary", {{"status", "complete"}}}};
  const json audit = {
      {"kind", "audit_checker"},
      {"created", "2026-12-01T01:00:00Z"},
      {"environment", json::object()},
      {"config", {{"checker", "./check.sh"}}},
      {"records",
       {{{"row", "mutant:1f2e"}, {"task", "softmax"}, {"verdict", "killed"}},
        {{"row", "mutant:3c4d"},
         {"task", "softmax"},
         {"checks", {{"strict", {{"verdict", "killed"}}}, {"kbv", {{"verdict", "survived"}}}}}}}},
      {"summary", {{"valid", true}}}};
  EXPECT_FALSE(h.append(eval).previous_run); // decisions are for suite runs only
  h.append(audit);
  const auto r = h.query({});
  ASSERT_EQ(r.workloads.size(), 4u);
  EXPECT_EQ(r.workloads[0].id, "eval/softmax/a");
  EXPECT_EQ(r.workloads[0].metric, "speedup");
  EXPECT_EQ(r.workloads[0].direction, "higher");
  EXPECT_DOUBLE_EQ(*r.workloads[0].points[0].estimate, 1.25);
  EXPECT_DOUBLE_EQ(*r.workloads[0].points[0].ci_hi, 1.3);
  EXPECT_EQ(r.workloads[0].points[0].verdict, "PASSED");
  EXPECT_EQ(r.workloads[0].points[0].series, "data/tasks/*.json");
  EXPECT_EQ(r.workloads[1].points[0].verdict, "TIMEOUT");
  EXPECT_FALSE(r.workloads[1].points[0].estimate);
  EXPECT_EQ(r.workloads[2].id, "mutant:1f2e");
  EXPECT_EQ(r.workloads[2].points[0].verdict, "killed");
  EXPECT_EQ(r.workloads[2].points[0].kind, "audit_checker");
  // Several checkers' verdicts on one row (audit checker --protocol), names in order.
  EXPECT_EQ(r.workloads[3].id, "mutant:3c4d");
  EXPECT_EQ(r.workloads[3].points[0].verdict, "kbv=survived strict=killed");
}

TEST(run_history, a_version_1_database_is_migrated_and_its_runs_still_compare) {
  const auto file = fresh_db("v1");
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(file.c_str(), &raw), SQLITE_OK);
    exec(raw, schema_v1_sql);
    // One run as version 1 stored it: no direction, no gates, no decision.
    exec(raw, "INSERT INTO runs VALUES (1, 'suite_run', 'nightly', '2026-11-01T00:00:00Z',"
              " 'cccc3333', 0, '{}', '{\"suite\": \"nightly\"}', '{\"status\": \"complete\"}');");
    exec(raw,
         "INSERT INTO records VALUES (1, 0, 'kernel.x', 'kernel_seconds', 's', 1e-05,"
         " 9.8e-06, 1.02e-05, '[9.8e-06, 9.9e-06, 1e-05, 1e-05, 1e-05, 1.01e-05, 1.02e-05]');");
    sqlite3_close(raw);
  }
  auto h = run_history::open_for_append(file);
  EXPECT_EQ(h.schema_version(), 2);
  // A version-2 run 1.5x slower: decided against the version-1 run, whose time unit says lower
  // is better (the migration's backfill).
  const auto r = h.append(suite_run("nightly", "2026-12-01T00:00:00Z", "dddd4444", false,
                                    {workload("kernel.x", around(15e-6))}),
                          quick());
  EXPECT_EQ(r.previous_run, 1);
  EXPECT_EQ(r.slower, 1u);
  const auto q = h.query(only("kernel.x"));
  ASSERT_EQ(q.workloads.size(), 1u);
  ASSERT_EQ(q.workloads[0].points.size(), 2u);
  EXPECT_EQ(q.workloads[0].points[0].revision, "cccc3333");
  EXPECT_DOUBLE_EQ(*q.workloads[0].points[0].estimate, 1e-5);
  EXPECT_FALSE(q.workloads[0].points[0].gates_pass); // version 1 kept no gates
  EXPECT_EQ(q.workloads[0].points[1].decision, "SLOWER");
  // The version-1 run is a BASE by revision (it has no gates, so never by "all gates passed").
  const auto base = h.baseline_document("nightly", "cccc");
  EXPECT_EQ(base["history"]["run_id"], 1);
  EXPECT_EQ(base["records"][0]["samples"].size(), 7u);
  EXPECT_THROW(h.baseline_document("nightly", std::nullopt, "2026-11-15"), history_error);
}

// One child appending `runs` runs; exit status 0 when every append returned.
[[noreturn]] void append_in_child(const fs::path& file, int child, int runs) {
  int status = 0;
  try {
    auto h = run_history::open_for_append(file);
    history_append_options o;
    o.compare.resamples = 200;
    for (int i = 0; i < runs; ++i) {
      const double marker = child * 1000 + i; // every run's own estimate
      auto doc = suite_run("shards", "2026-12-01T00:00:00Z", "eeee5555", false,
                           {workload("kernel.x", around(10e-6)), workload("kernel.z", around(1))});
      doc["records"][0]["estimate"] = marker;
      h.append(doc, o);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "child %d: %s\n", child, e.what());
    status = 1;
  }
  ::_exit(status);
}

TEST(run_history, two_processes_appending_at_once_lose_no_row) {
  const auto file = fresh_db("concurrent");
  constexpr int runs = 200;
  pid_t kids[2];
  for (int c = 0; c < 2; ++c) {
    kids[c] = ::fork();
    ASSERT_GE(kids[c], 0);
    if (kids[c] == 0) append_in_child(file, c, runs);
  }
  for (pid_t k : kids) {
    int status = 0;
    ASSERT_EQ(::waitpid(k, &status, 0), k);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  auto h = run_history::open_existing(file);
  EXPECT_EQ(h.run_count(), 2u * runs);
  const auto q = h.query(only("kernel.x"));
  ASSERT_EQ(q.workloads.size(), 1u);
  std::set<double> seen;
  std::size_t decided = 0;
  for (const auto& p : q.workloads[0].points) {
    seen.insert(*p.estimate);
    decided += !p.decision.empty();
  }
  std::set<double> expected;
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < runs; ++i)
      expected.insert(c * 1000 + i);
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(decided, 2u * runs - 1); // every run but the first was compared with the one before
  EXPECT_EQ(h.query(only("kernel.z")).workloads[0].points.size(), 2u * runs);
}

TEST(run_history, bad_databases_are_one_line_errors) {
  const auto dir = test::scratch_dir("history");
  const auto message = [](auto f) {
    try {
      f();
    } catch (const history_error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const auto absent = dir / "absent.sqlite";
  EXPECT_NE(message([&] { run_history::open_existing(absent); }).find("does not exist"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(absent)); // reading never creates it

  const auto garbage = dir / "garbage.sqlite";
  std::ofstream(garbage) << "this is not a database, it is a text file of some length\n";
  for (auto open : {&run_history::open_existing, &run_history::open_for_append})
    EXPECT_NE(message([&] { open(garbage); }).find("file is not a database"), std::string::npos);

  const auto other = fresh_db("other");
  const auto newer = fresh_db("newer");
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(other.c_str(), &raw), SQLITE_OK);
    exec(raw, "CREATE TABLE t (x INTEGER);");
    sqlite3_close(raw);
    run_history::open_for_append(newer);
    ASSERT_EQ(sqlite3_open(newer.c_str(), &raw), SQLITE_OK);
    exec(raw, "UPDATE schema_version SET version = 3;");
    sqlite3_close(raw);
  }
  EXPECT_NE(message([&] { run_history::open_for_append(other); }).find("no schema_version"),
            std::string::npos);
  const auto newer_message = message([&] { run_history::open_existing(newer); });
  EXPECT_NE(newer_message.find("newer kernelgate (schema version 3"), std::string::npos)
      << newer_message;

  // A stored document that is not JSON any more: named when a BASE is rebuilt from it.
  const auto corrupt = fresh_db("corrupt");
  run_history::open_for_append(corrupt).append(suite_run("nightly", "2026-12-01T00:00:00Z", "ffff",
                                                         false, {workload("kernel.x", around(1))}));
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(corrupt.c_str(), &raw), SQLITE_OK);
    exec(raw, "UPDATE runs SET environment = '{not json';");
    sqlite3_close(raw);
  }
  const auto corrupt_message =
      message([&] { run_history::open_existing(corrupt).baseline_document("nightly", "ffff"); });
  EXPECT_NE(corrupt_message.find("is not JSON"), std::string::npos) << corrupt_message;
  for (const auto& m : {newer_message, corrupt_message})
    EXPECT_EQ(m.find('\n'), std::string::npos);

  // Not a result document: refused before anything is written.
  auto h = run_history::open_for_append(fresh_db("refused"));
  EXPECT_THROW(h.append(json{{"kind", "suite_run"}}), history_error);
  EXPECT_EQ(h.run_count(), 0u);
}

TEST(run_history, since_keeps_the_runs_created_from_then_on) {
  auto h = run_history::open_for_append(fresh_db("since"));
  for (const char* created :
       {"2026-11-30T23:59:59Z", "2026-12-01T10:00:00Z", "2026-12-02T00:00:00Z"})
    h.append(suite_run("nightly", created, "abc", false, {workload("kernel.x", around(1))}),
             quick());
  const auto count = [&](const std::string& since) {
    const auto q = h.query(since_filter(since));
    return q.workloads.empty() ? 0 : q.workloads[0].points.size();
  };
  EXPECT_EQ(count("2026-11-01"), 3u);
  EXPECT_EQ(count("2026-12-01"), 2u);
  EXPECT_EQ(count("2026-12-01T10:00:00Z"), 2u);
  EXPECT_EQ(count("2026-12-01T10:00:01Z"), 1u);
  EXPECT_EQ(count("2026-12-01T10"), 2u);
  EXPECT_EQ(count("2026-12-03"), 0u);
  for (const char* bad :
       {"yesterday", "2026-13-01", "2026-12-01T1", "2026-12-01 10:00", "2026-12", "2026-12-01Z"})
    EXPECT_THROW(checked_since(bad), history_error) << bad;
}

TEST(run_history, the_baseline_is_the_last_complete_run_whose_gates_all_passed) {
  auto h = run_history::open_for_append(fresh_db("baseline"));
  const auto add = [&](const std::string& suite, const std::string& created, const std::string& rev,
                       bool pass) {
    h.append(
        suite_run(suite, created, rev, false, {workload("kernel.x", around(1), "lower", pass)}),
        quick());
  };
  add("nightly", "2026-12-01T00:00:00Z", "rev1", true);  // run 1
  add("nightly", "2026-12-02T00:00:00Z", "rev2", true);  // run 2: the last passing nightly
  add("nightly", "2026-12-03T00:00:00Z", "rev3", false); // run 3: a gate fails
  add("smoke", "2026-12-04T00:00:00Z", "rev4", true);    // run 4: another suite
  EXPECT_EQ(h.baseline_document("nightly", std::nullopt)["history"]["run_id"], 2);
  EXPECT_EQ(h.baseline_document("nightly", std::nullopt)["created"], "2026-12-02T00:00:00Z");
  EXPECT_EQ(h.baseline_document("smoke", std::nullopt)["history"]["run_id"], 4);
  // Before run 2's own time (NEW already appended): run 1.
  EXPECT_EQ(
      h.baseline_document("nightly", std::nullopt, "2026-12-02T00:00:00Z")["history"]["run_id"], 1);
  // By revision, gates or not.
  EXPECT_EQ(h.baseline_document("nightly", "rev3")["history"]["run_id"], 3);
  EXPECT_THROW(h.baseline_document("nightly", "rev4"), history_error);
  EXPECT_THROW(h.baseline_document("weekly", std::nullopt), history_error);
  // The rebuilt document is a suite run that compare reads back.
  const auto doc = h.baseline_document("nightly", std::nullopt);
  const auto base = suite_run_from_document(doc, "history#2", "BASE");
  ASSERT_EQ(base.records.size(), 1u);
  EXPECT_EQ(base.records[0]["samples"], json(around(1)));
  EXPECT_EQ(base.records[0]["gates"][0]["pass"], true);
  EXPECT_EQ(base.environment["git"]["revision"], "rev2");
}

} // namespace
