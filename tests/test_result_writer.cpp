#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <gtest/gtest.h>

#include "reports/remove_tree.h"
#include "reports/result_writer.h"

using namespace kg;
namespace fs = std::filesystem;

namespace {
fs::path fresh_dir(const std::string& name) {
  const auto d = fs::temp_directory_path() / ("kg_rw_" + name + "_" + std::to_string(getpid()));
  kg::remove_tree(d);
  return d;
}
} // namespace

TEST(result_writer, streams_records_and_writes_result_at_the_end) {
  const auto dir = fresh_dir("stream");
  result_writer w(dir, "audit", {"kernelgate", "audit"}, {{"k", 1}}, {{"c", 2}});
  w.append({{"type", "observation"}, {"id", "a"}});
  // Streamed before the end: the line is on disk, result.json is not.
  {
    std::ifstream f(dir / "records.jsonl");
    std::string line;
    ASSERT_TRUE(std::getline(f, line));
    EXPECT_EQ(nlohmann::json::parse(line)["id"], "a");
  }
  EXPECT_FALSE(fs::exists(dir / "result.json"));
  w.append({{"type", "observation"}, {"id", "b"}});
  const auto path = w.finish({{"status", "complete"}});
  EXPECT_FALSE(fs::exists(dir / "result.json.tmp"));
  std::ifstream f(path);
  const auto doc = nlohmann::json::parse(f);
  EXPECT_EQ(doc["schema"], "kernelgate.result/1");
  EXPECT_EQ(doc["records"].size(), 2u);
  EXPECT_EQ(doc["environment"]["k"], 1);
  kg::remove_tree(dir);
}

TEST(result_writer, removes_a_stale_result_and_rejects_unusable_folders) {
  const auto dir = fresh_dir("stale");
  fs::create_directories(dir);
  std::ofstream(dir / "result.json") << "{}";
  result_writer w(dir, "audit", {"x"}, {}, {});
  EXPECT_FALSE(fs::exists(dir / "result.json")); // an old result must not pass for this run's
  const auto file = dir / "plain_file";
  std::ofstream(file) << "x";
  EXPECT_THROW(result_writer(file / "sub", "audit", {"x"}, {}, {}), output_error);
  kg::remove_tree(dir);
}

TEST(remove_tree, removes_nested_folders_and_tolerates_missing_paths) {
  const auto dir = fresh_dir("tree");
  fs::create_directories(dir / "a" / "b");
  std::ofstream(dir / "a" / "b" / "f") << "x";
  std::ofstream(dir / "g") << "y";
  EXPECT_TRUE(kg::remove_tree(dir));
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_TRUE(kg::remove_tree(dir)); // already gone
}

TEST(result_writer, resuming_keeps_whole_records_and_cuts_a_torn_line) {
  const auto dir = fresh_dir("resume");
  {
    result_writer w(dir, "suite_run", {"x"}, {}, {});
    w.append({{"type", "suite_workload"}, {"id", "a"}});
    w.append({{"type", "suite_workload"}, {"id", "b"}});
  }
  // A kill in the middle of the third line's write.
  std::ofstream(dir / "records.jsonl", std::ios::app) << R"({"type":"suite_wor)";
  std::ofstream(dir / "result.json") << "{}";
  int torn = -1;
  {
    result_writer w(result_writer::resume_tag{}, dir, "suite_run", {"x"}, {}, {}, &torn);
    EXPECT_EQ(torn, 1);
    EXPECT_FALSE(fs::exists(dir / "result.json"));
    ASSERT_EQ(w.record_count(), 2u);
    EXPECT_EQ(w.records()[1]["id"], "b");
    w.append({{"type", "suite_workload"}, {"id", "c"}});
    w.finish({{"status", "complete"}});
  }
  int torn_after = -1;
  const auto lines = read_records(dir / "records.jsonl", &torn_after);
  EXPECT_EQ(torn_after, 0);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2]["id"], "c");
  std::ifstream f(dir / "result.json");
  EXPECT_EQ(nlohmann::json::parse(f)["records"].size(), 3u);
  // Nothing to resume: a folder without records.jsonl.
  const auto empty = fresh_dir("resume_empty");
  fs::create_directories(empty);
  EXPECT_THROW(result_writer(result_writer::resume_tag{}, empty, "suite_run", {}, {}, {}),
               output_error);
  kg::remove_tree(empty);
  kg::remove_tree(dir);
}

TEST(result_writer, resuming_drops_the_records_of_work_an_interruption_left_undone) {
  const auto dir = fresh_dir("resume_interrupted");
  {
    result_writer w(dir, "eval", {"x"}, {}, {});
    w.append({{"type", "evaluation"}, {"id", "a"}, {"status", "PASSED"}});
    w.append({{"type", "evaluation"}, {"id", "b"}, {"status", "MISSING"}, {"interrupted", true}});
    w.append({{"type", "evaluation"}, {"id", "c"}, {"status", "MISSING"}, {"interrupted", false}});
    w.append({{"type", "evaluation"}, {"id", "d"}, {"status", "MISSING"}, {"interrupted", true}});
  }
  std::ofstream(dir / "records.jsonl", std::ios::app) << R"({"type":"evalu)"; // and a torn line
  {
    result_writer w(result_writer::resume_tag{}, dir, "eval", {"x"}, {}, {});
    ASSERT_EQ(w.record_count(), 2u);
    EXPECT_EQ(w.records()[0]["id"], "a");
    EXPECT_EQ(w.records()[1]["id"], "c");
    w.append({{"type", "evaluation"}, {"id", "b"}, {"status", "PASSED"}});
  }
  int torn = -1;
  const auto lines = read_records(dir / "records.jsonl", &torn);
  EXPECT_EQ(torn, 0);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["id"], "a");
  EXPECT_EQ(lines[1]["id"], "c");
  EXPECT_EQ(lines[2]["id"], "b");
  EXPECT_EQ(lines[2]["status"], "PASSED");
  kg::remove_tree(dir);
}
