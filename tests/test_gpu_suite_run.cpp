// `kernelgate run` on the GPU: the smoke suite's kernel-level workloads measured and gated, and a
// run killed with SIGKILL mid-suite then resumed ending with every workload id once.
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "cli_run.h"
#include "gpu_test_support.h"
#include "reports/remove_tree.h"
#include "reports/result_writer.h"
#include "suite/suite_catalog.h"

namespace fs = std::filesystem;

namespace {

fs::path out_dir(const std::string& name) {
  const auto d =
      fs::temp_directory_path() / ("kg_gpu_run_" + name + "_" + std::to_string(getpid()));
  kg::remove_tree(d);
  return d;
}

std::size_t lines_in(const fs::path& f) {
  std::ifstream in(f);
  std::size_t n = 0;
  for (std::string l; std::getline(in, l);)
    ++n;
  return n;
}

} // namespace

TEST(gpu_suite_run, smoke_kernel_workloads_are_measured_and_pass_their_oracles) {
  KG_REQUIRE_GPU();
  const auto dir = out_dir("smoke_kernels");
  const auto r =
      kg::test::run({"run", "--suite", "smoke", "--filter", "^kernel\\.", "--out", dir.string()});
  EXPECT_EQ(r.rc, 0) << r.err << r.out;
  std::ifstream f(dir / "result.json");
  const auto doc = nlohmann::json::parse(f);
  const auto expected =
      kg::filter_workloads(kg::load_suite_validated("smoke").workloads, "^kernel\\.");
  ASSERT_EQ(doc["records"].size(), expected.size());
  for (const auto& rec : doc["records"]) {
    SCOPED_TRACE(rec["id"].get<std::string>());
    EXPECT_FALSE(rec.contains("error"));
    EXPECT_GE(rec["samples"].size(), 30u);
    EXPECT_GT(rec["estimate"].get<double>(), 0.0);
    EXPECT_LE(rec["ci95"][0].get<double>(), rec["estimate"].get<double>());
    ASSERT_TRUE(rec["sol"].is_object());
    // A kernel faster than the copy ceiling allows would be a broken bound or timer.
    EXPECT_LT(rec["sol"]["fraction"].get<double>(), 1.15);
    for (const auto& g : rec["gates"])
      EXPECT_TRUE(g["pass"].get<bool>()) << g.dump();
    EXPECT_EQ(rec["roles"].begin().value()["sha256"].get<std::string>().size(), 64u);
  }
  kg::remove_tree(dir);
}

TEST(gpu_suite_run, a_run_killed_mid_suite_and_resumed_has_every_id_once) {
  KG_REQUIRE_GPU();
  const auto dir = out_dir("killed");
  const std::string filter = "^kernel\\.(gemv|rmsnorm|silu_mul)";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::execl(KG_KERNELGATE_BIN, KG_KERNELGATE_BIN, "run", "--suite", "nightly", "--filter",
            filter.c_str(), "--out", dir.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Kill it once a few records are on disk, in the middle of the next workload.
  const auto t0 = std::chrono::steady_clock::now();
  while (lines_in(dir / "records.jsonl") < 4 &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(120))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  const auto before = lines_in(dir / "records.jsonl");
  EXPECT_GE(before, 4u);
  EXPECT_FALSE(fs::exists(dir / "result.json"));

  const auto r =
      kg::test::run({"run", "--suite", "nightly", "--filter", filter, "--resume", dir.string()});
  EXPECT_EQ(r.rc, 0) << r.err;
  const auto expected = kg::filter_workloads(kg::load_suite_validated("nightly").workloads, filter);
  const auto records = kg::read_records(dir / "records.jsonl");
  std::multiset<std::string> ids;
  for (const auto& rec : records)
    ids.insert(rec["id"].get<std::string>());
  EXPECT_EQ(ids.size(), expected.size());
  for (const auto& w : expected)
    EXPECT_EQ(ids.count(w.id), 1u) << w.id;
  kg::remove_tree(dir);
}
