// GPU: `kernelgate eval` end to end -- the catalog's own kernels pass strict, and every red-team
// candidate gets its intended status while the run carries on past crashes and hangs.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpu_test_support.h"
#include "suite/cli.h"
#include "suite/exit_codes.h"

using namespace kg;
namespace fs = std::filesystem;

namespace {
struct eval_run {
  int rc;
  std::string out, err;
  std::map<std::string, nlohmann::json> records; // "task/candidate" -> record
};

eval_run eval(const std::string& candidates, const std::string& name, const std::string& timeout) {
  ::setenv("KERNELGATE_WORKER", KG_KERNELGATE_BIN, 1);
  const fs::path out = fs::temp_directory_path() / ("kg-gpu-eval-" + name);
  std::ostringstream o, e;
  eval_run r;
  r.rc = kernelgate_main({"kernelgate", "eval", "--tasks", std::string(KG_SOURCE_DIR) + "/data/tasks",
                          "--candidates", candidates, "--timeout", timeout, "--out", out.string(),
                          "--cache", (out / "cache").string()},
                         o, e);
  r.out = o.str();
  r.err = e.str();
  std::ifstream in(out / "result.json");
  const auto j = nlohmann::json::parse(in);
  for (const auto& rec : j.at("records"))
    if (rec.at("type") == "evaluation")
      r.records[rec.at("task").get<std::string>() + "/" + rec.at("candidate").get<std::string>()] = rec;
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

TEST(gpu_eval, red_team_candidates_get_their_intended_status) {
  KG_REQUIRE_GPU();
  const std::string dir = std::string(KG_SOURCE_DIR) + "/tests/red_team";
  const auto r = eval(dir, "red", "15");
  std::cout << r.out;
  EXPECT_EQ(r.rc, exit_code::failures) << r.err;
  std::ifstream in(dir + "/expected.json");
  const auto expected = nlohmann::json::parse(in);
  for (const auto& [k, status] : expected.items()) {
    ASSERT_TRUE(r.records.count(k)) << k << " was not evaluated";
    EXPECT_EQ(r.records.at(k).at("status"), status.get<std::string>())
        << k << ": " << r.records.at(k).at("status_reason");
  }
}
