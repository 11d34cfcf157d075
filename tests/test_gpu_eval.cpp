// GPU: `kernelgate eval` end to end -- the catalog's own kernels pass strict, and every red-team
// candidate gets its intended status while the run carries on past crashes and hangs.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpu_test_support.h"
#include "reports/remove_tree.h"
#include "suite/cli.h"
#include "suite/exit_codes.h"

using namespace kg;
namespace fs = std::filesystem;

namespace {
struct eval_run {
  int rc;
  std::string out, err;
  std::map<std::string, nlohmann::json> records; // "task/candidate" -> record
  std::uint64_t seed = 0;                        // the run's seed, from its summary
};

eval_run eval(const std::string& candidates, const std::string& name, const std::string& timeout,
              const std::string& time = "no", const std::string& tasks = "/data/tasks",
              const std::string& protocol = "strict") {
  ::setenv("KERNELGATE_WORKER", KG_WORKER_BIN, 1); // the slim worker, as kernelgate picks it
  const fs::path out = fs::temp_directory_path() / ("kg-gpu-eval-" + name);
  std::ostringstream o, e;
  eval_run r;
  r.rc =
      kernelgate_main({"kernelgate", "eval", "--tasks", std::string(KG_SOURCE_DIR) + tasks,
                       "--candidates", candidates, "--timeout", timeout, "--out", out.string(),
                       "--cache", (out / "cache").string(), "--time", time, "--protocol", protocol},
                      o, e);
  r.out = o.str();
  r.err = e.str();
  std::ifstream in(out / "result.json");
  const auto j = nlohmann::json::parse(in);
  r.seed = j.at("summary").at("seed").at("value").get<std::uint64_t>();
  for (const auto& rec : j.at("records"))
    if (rec.at("type") == "evaluation")
      r.records[rec.at("task").get<std::string>() + "/" + rec.at("candidate").get<std::string>()] =
          rec;
  return r;
}
} // namespace

TEST(gpu_eval, every_task_kernel_of_the_catalog_passes_strict) {
  KG_REQUIRE_GPU();
  const auto r = eval(std::string(KG_SOURCE_DIR) + "/kernels/tasks", "catalog", "120");
  std::cout << r.out;
  EXPECT_EQ(r.rc, exit_code::ok) << r.err;
  ASSERT_FALSE(r.records.empty());
  for (const auto& [k, rec] : r.records)
    EXPECT_EQ(rec.at("status"), "PASSED") << k << ": " << rec.at("status_reason");
}

// No false rejections: every task kernel and every variant passes every input regime its task
// declares, run after run, each run on a new secret seed (KG_REGRESSION_RUNS, default 20).
TEST(gpu_eval, honest_kernels_pass_every_regime_run_after_run) {
  KG_REQUIRE_GPU();
  const char* env = std::getenv("KG_REGRESSION_RUNS");
  const int runs = env ? std::atoi(env) : 20;
  std::map<std::string, int> passed;
  for (int i = 0; i < runs; ++i)
    for (const char* dir : {"/kernels/tasks", "/kernels/variants"}) {
      const auto r = eval(std::string(KG_SOURCE_DIR) + dir, "regimes", "120");
      int ok = 0, n = 0;
      for (const auto& [k, rec] : r.records)
        if (rec.at("status") != "MISSING") {
          ++n;
          ok += rec.at("status") == "PASSED" ? 1 : 0;
        }
      std::cout << "run " << i << " " << dir << ": " << ok << " of " << n << " PASSED (seed "
                << r.seed << ")" << std::endl;
      for (const auto& [k, rec] : r.records) {
        if (rec.at("status") == "MISSING") continue; // a task without a variant
        EXPECT_EQ(rec.at("status"), "PASSED")
            << "run " << i << " " << k << ": " << rec.at("status_reason") << " seed " << r.seed
            << " worst " << rec.at("detail").value("worst_element", nlohmann::json());
        if (rec.at("status") == "PASSED") ++passed[k];
      }
    }
  std::cout << "honest kernels passing every regime, of " << runs << " runs each:\n";
  for (const auto& [k, n] : passed)
    std::cout << "  " << k << " " << n << "\n";
  remove_tree(fs::temp_directory_path() / "kg-gpu-eval-regimes");
}

TEST(gpu_eval, red_team_candidates_get_their_intended_status) {
  KG_REQUIRE_GPU();
  const std::string dir = std::string(KG_SOURCE_DIR) + "/tests/red_team";
  // Timed as a real run is (the side-stream candidate is caught while timed).
  const auto r = eval(dir, "red", "15", "yes");
  std::cout << r.out;
  EXPECT_EQ(r.rc, exit_code::failures) << r.err;
  // The hang is cut at its limit (15 s, plus the kill), and the pairs after it still ran.
  ASSERT_TRUE(r.records.count("relu/hangs"));
  EXPECT_LT(r.records.at("relu/hangs").at("detail").at("worker").at("seconds").get<double>(), 17.0);
  std::ifstream in(dir + "/expected.json");
  const auto expected = nlohmann::json::parse(in);
  for (const auto& [k, status] : expected.items()) {
    ASSERT_TRUE(r.records.count(k)) << k << " was not evaluated";
    EXPECT_EQ(r.records.at(k).at("status"), status.get<std::string>())
        << k << ": " << r.records.at(k).at("status_reason");
  }
}

// Timing inside eval: the task's own kernel timed against itself is a tie, with an interval.
TEST(gpu_eval, a_passing_candidate_is_timed_against_the_task_kernel) {
  KG_REQUIRE_GPU();
  const auto r = eval(std::string(KG_SOURCE_DIR) + "/kernels/tasks", "timed", "60", "yes",
                      "/data/tasks/softmax_lastdim.json");
  std::cout << r.out;
  ASSERT_EQ(r.records.size(), 1u);
  const auto& rec = r.records.begin()->second;
  ASSERT_EQ(rec.at("status"), "PASSED") << rec.at("status_reason");
  ASSERT_TRUE(rec.contains("speedup")) << rec.at("detail").dump();
  const double lo = rec.at("speedup_ci95")[0], hi = rec.at("speedup_ci95")[1];
  std::cout << "candidate " << rec.at("candidate_us") << " us, baseline " << rec.at("baseline_us")
            << " us, speedup " << rec.at("speedup") << " [" << lo << ", " << hi << "]\n";
  EXPECT_GT(rec.at("candidate_us").get<double>(), 0.0);
  EXPECT_LE(lo, 1.0 + 0.03); // the same kernel: the interval reaches into the 3% tie band
  EXPECT_GE(hi, 1.0 - 0.03);
}

// The task's LibTorch reference is timed on the GPU once, with the same timer and inputs, and
// every timed record carries torch_us and speedup_vs_torch = torch_us / candidate_us; a second
// run reads the time from the store beside the compile cache instead of measuring it again.
TEST(gpu_eval, the_libtorch_reference_is_timed_once_then_read_from_the_cache) {
  KG_REQUIRE_GPU();
  remove_tree(fs::temp_directory_path() / "kg-gpu-eval-torch");
  const std::string task = "/data/tasks/softmax_lastdim.json";
  const auto kernels = std::string(KG_SOURCE_DIR) + "/kernels/tasks";
  const auto first = eval(kernels, "torch", "60", "yes", task);
  ASSERT_EQ(first.records.size(), 1u) << first.err;
  const auto& a = first.records.begin()->second;
  ASSERT_EQ(a.at("status"), "PASSED") << a.at("status_reason");
  ASSERT_TRUE(a.contains("torch_reference")) << a.dump();
  const auto& ref = a.at("torch_reference").at("reference");
  if (ref.value("status", "") == "UNAVAILABLE")
    GTEST_SKIP() << "SKIPPED: " << ref.at("status_reason").get<std::string>();
  ASSERT_EQ(ref.at("status"), "TIMED") << ref.dump();
  const double torch_us = a.at("torch_us"), cand_us = a.at("candidate_us");
  std::cout << "softmax: candidate " << cand_us << " us, LibTorch " << torch_us
            << " us, speedup vs torch " << a.at("speedup_vs_torch") << "\n";
  EXPECT_GT(torch_us, 0.0);
  EXPECT_NEAR(a.at("speedup_vs_torch").get<double>(), torch_us / cand_us,
              1e-9 * torch_us / cand_us);
  EXPECT_EQ(
      a.at("torch_reference").at("source").get<std::string>().rfind("measured in this run", 0), 0u);
  const auto second = eval(kernels, "torch", "60", "yes", task);
  ASSERT_EQ(second.records.size(), 1u) << second.err;
  const auto& b = second.records.begin()->second;
  ASSERT_TRUE(b.contains("torch_us")) << b.dump();
  EXPECT_EQ(b.at("torch_us").get<double>(), torch_us);
  EXPECT_EQ(b.at("torch_reference").at("source").get<std::string>().rfind("cached in", 0), 0u);
  EXPECT_FALSE(b.at("detail").contains("torch_reference")) << "measured again";
}

// The same red team under KernelBench's checker as modelled (torch.rand inputs, allclose on the
// candidate side): the identity ReLU it cannot tell from ReLU passes there, while strict rejects
// it.
TEST(gpu_eval, kernelbench_protocol_lets_the_identity_relu_through) {
  KG_REQUIRE_GPU();
  const auto r = eval(std::string(KG_SOURCE_DIR) + "/tests/red_team", "red-kb", "15", "no",
                      "/data/tasks/relu.json", "kernelbench");
  std::cout << r.out;
  ASSERT_TRUE(r.records.count("relu/identity"));
  EXPECT_EQ(r.records.at("relu/identity").at("status"), "PASSED")
      << r.records.at("relu/identity").at("status_reason");
  EXPECT_EQ(r.records.at("relu/write_nothing").at("status"), "INCORRECT_NUMERICAL");
}
