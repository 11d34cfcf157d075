// `kernelgate eval`'s pipeline without a GPU: KERNELGATE_FAKE_DEVICE=1 with a stand-in worker
// (tests/fake_worker.cpp: zeros for every output, a crash or a hang where the candidate's object
// carries a marker). What is checked is the parent's part -- real candidates compiled by nvcc,
// several worker threads, records in pair order, a crash and a hang contained, a task without a
// candidate MISSING -- which the GPU tests cover only on a GPU.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "reports/remove_tree.h"
#include "suite/cli.h"
#include "suite/exit_codes.h"
#include "suite/sandbox.h"
#include "suite/task_catalog.h"

using namespace kg;
namespace fs = std::filesystem;

TEST(eval_pipeline, pairs_run_on_a_worker_pool_and_are_recorded_in_order) {
  const fs::path d = fs::temp_directory_path() / ("kg-eval-pipeline-" + std::to_string(::getpid()));
  remove_tree(d);
  const fs::path src = KG_SOURCE_DIR;
  fs::create_directories(d / "tasks");
  fs::create_directories(d / "cands/softmax_lastdim");
  for (const char* t : {"softmax_lastdim.json", "sum_lastdim.json"})
    fs::copy_file(src / "data/tasks" / t, d / "tasks" / t);
  std::ifstream in(src / "kernels/tasks/softmax_lastdim.cu");
  std::stringstream kernel;
  kernel << in.rdbuf();
  // Markers the fake worker looks for in the shared object (kept by `used`).
  const std::map<std::string, std::string> cands = {
      {"a", ""},
      {"b", "// another copy\n"},
      {"crash", "__attribute__((used)) static const char marker[] = \"KG_FAKE_CRASH\";\n"},
      {"hang", "__attribute__((used)) static const char marker[] = \"KG_FAKE_HANG\";\n"}};
  for (const auto& [name, extra] : cands)
    std::ofstream(d / "cands/softmax_lastdim" / (name + ".cu")) << extra << kernel.str();
  ::setenv("KERNELGATE_FAKE_DEVICE", "1", 1);
  ::setenv("KERNELGATE_WORKER", KG_FAKE_WORKER_BIN, 1);
  std::ostringstream out, err;
  const auto t0 = std::chrono::steady_clock::now();
  const int rc =
      kernelgate_main({"kernelgate", "eval", "--tasks", (d / "tasks").string(), "--candidates",
                       (d / "cands").string(), "--workers", "3", "--timeout", "3", "--cache",
                       (d / "cache").string(), "--out", (d / "out").string(), "--kernelbench",
                       (d / "kb/eval_results.json").string()},
                      out, err);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::unsetenv("KERNELGATE_FAKE_DEVICE");
  ::unsetenv("KERNELGATE_WORKER");
  EXPECT_EQ(rc, exit_code::failures) << err.str();
  std::ifstream r(d / "out/result.json");
  const auto j = nlohmann::json::parse(r);
  std::vector<std::string> ids, statuses;
  for (const auto& rec : j.at("records"))
    if (rec.at("type") == "evaluation") {
      ids.push_back(rec.at("id"));
      statuses.push_back(rec.at("status"));
    }
  const std::vector<std::string> want_ids = {"eval/softmax_lastdim/a", "eval/softmax_lastdim/b",
                                             "eval/softmax_lastdim/crash",
                                             "eval/softmax_lastdim/hang", "eval/sum_lastdim/-"};
  EXPECT_EQ(ids, want_ids);
  const std::vector<std::string> want = {"INCORRECT_NUMERICAL", "INCORRECT_NUMERICAL",
                                         "RUNTIME_ERROR", "TIMEOUT", "MISSING"};
  EXPECT_EQ(statuses, want) << out.str();
  const auto& recs = j.at("records");
  for (const auto& rec : recs) {
    if (rec.at("id") != "eval/softmax_lastdim/crash") continue;
    EXPECT_NE(rec.at("status_reason").get<std::string>().find("signal 11"), std::string::npos)
        << rec.at("status_reason");
  }
  // The hang was cut at its 3 s limit while the other pairs went on beside it.
  EXPECT_LT(s, 60.0);
  // KernelBench's layout: problem 1 is softmax_lastdim (the first task), with its four samples;
  // sum_lastdim had no candidate, so no samples. Nothing was timed: the baseline level is empty,
  // and fastp reads the pair as KernelBench files (0 aligned, exit 0).
  std::ifstream kbf(d / "kb/eval_results.json");
  const auto kb = nlohmann::json::parse(kbf);
  ASSERT_TRUE(kb.contains("1")) << kb.dump();
  EXPECT_EQ(kb["1"].size(), 4u);
  EXPECT_EQ(kb["1"][2]["metadata"]["kernelgate_status"], "RUNTIME_ERROR");
  EXPECT_FALSE(kb.contains("2"));
  std::ifstream basef(d / "kb/eval_results.baseline.json");
  EXPECT_TRUE(nlohmann::json::parse(basef).at("level1").empty());
  std::ostringstream fo, fe;
  EXPECT_EQ(
      kernelgate_main({"kernelgate", "fastp", (d / "kb/eval_results.json").string(), "--baseline",
                       (d / "kb/eval_results.baseline.json").string(), "--json"},
                      fo, fe),
      exit_code::ok)
      << fe.str();
  // Scratch tensors are gone; the worker logs stay.
  EXPECT_TRUE(fs::exists(d / "out/workers/worker-0.log"));
  remove_tree(d);
}

// The CPU side of a pair is shared where the data is the same: draw 0 of each shape is the trial
// the reference check uses, and the two timed sets are draws 0 and 1 of the first shape; only the
// fresh timing set is new. softmax_lastdim: 2 shapes x 3 draws + 1 fresh set = 7 distinct trials.
TEST(eval_pipeline, timing_and_the_reference_check_reuse_correctness_trials) {
  const auto t = load_task(std::string(KG_SOURCE_DIR) + "/data/tasks/softmax_lastdim.json");
  sandbox_options opt;
  std::set<std::string> ids;
  for (const auto& k : planned_trials(t, opt))
    ids.insert(k.id());
  EXPECT_EQ(ids.size(), t.shapes.size() * 3 + 1);
  for (const auto& shape : t.shapes) // the reference check's keys are among them
    EXPECT_TRUE(ids.count(trial_key{&t, &shape, opt.seed, {}, true}.id())) << shape.name;
  opt.time = false;
  EXPECT_EQ(planned_trials(t, opt).size(), t.shapes.size() * 3);
}
