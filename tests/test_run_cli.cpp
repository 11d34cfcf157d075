// `kernelgate run`'s bad input, without a GPU: each refusal is one line, exit 2 (or 3 for the
// missing GPU), and nothing is written.
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "gpu/device_info.h"
#include "reports/remove_tree.h"
#include "workloads/qwen3.h"

namespace fs = std::filesystem;
using kg::test::lines;
using kg::test::run;

namespace {
const std::string overrides = std::string(KG_SOURCE_DIR) + "/tests/overrides/";

fs::path out_dir(const std::string& name) {
  const auto d =
      fs::temp_directory_path() / ("kg_run_cli_" + name + "_" + std::to_string(getpid()));
  kg::remove_tree(d);
  return d;
}
} // namespace

TEST(run_cli, bad_suites_filters_and_overrides_are_one_line_exit_2_and_write_nothing) {
  const auto dir = out_dir("bad");
  struct bad_case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<bad_case> cases = {
      {{"--suite", "no_such_suite"}, "unknown suite 'no_such_suite'"},
      {{"--suite", "smoke", "--filter", "("}, "bad workload filter"},
      {{"--suite", "smoke", "--filter", "^nothing-matches$"}, "no workload of suite smoke"},
      {{"--suite", "smoke", "--clocks", "fast"}, "--clocks 'fast'"},
      {{"--suite", "smoke", "--override", "attention=" + overrides + "gemv_plain.cu"},
       "role 'attention' cannot be overridden"},
      {{"--suite", "smoke", "--override", "gemv.down"}, "expected ROLE=FILE.cu"},
      {{"--suite", "smoke", "--override", "gemv.down=" + overrides + "missing.cu"}, "cannot read"},
      {{"--suite", "smoke", "--override", "gemv.down=" + overrides + "gemv_broken.cu"},
       "does not compile"},
      {{"--suite", "smoke", "--resume", dir.string()}, "cannot resume"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"run"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    if (std::find(args.begin(), args.end(), "--resume") == args.end()) {
      args.push_back("--out");
      args.push_back(dir.string());
    }
    const auto r = run(args);
    SCOPED_TRACE(c.says);
    EXPECT_EQ(r.rc, 2) << r.err;
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "records.jsonl"));
  }
  kg::remove_tree(dir);
}

// --warm-from names a finished run whose serving records carry warm-up models; anything else is
// one line, exit 2, before the GPU is looked for. Hand-made runs: one without any model, one whose
// model has a batch out of order, one that is not a result at all.
TEST(run_cli, warm_from_a_run_without_usable_models_is_one_line_exit_2) {
  const auto dir = out_dir("warm");
  const auto write_run = [&](const std::string& name, const nlohmann::json& extra) {
    const auto folder = dir / name;
    fs::create_directories(folder);
    nlohmann::json rec = {
        {"type", "suite_workload"},
        {"id", "serving.p99.production.512-2048.solo"},
        {"metric", {{"name", "p99_itl_ms"}, {"direction", "lower"}, {"unit", "ms"}}},
        {"samples", {30.0, 31.0, 32.0}},
        {"gates", nlohmann::json::array()},
        {"extra", extra}};
    nlohmann::json doc = {{"schema", "kernelgate.result/1"},
                          {"kind", "suite_run"},
                          {"environment", nlohmann::json::object()},
                          {"config", {{"suite", "smoke"}}},
                          {"records", {rec}},
                          {"summary", {{"status", "complete"}}}};
    std::ofstream(folder / "result.json") << doc.dump();
    return folder.string();
  };
  const auto none = write_run("none", {{"setup", "engine.whole"}});
  const auto disordered = write_run(
      "disordered", {{"warm_start",
                      {{"decode_seconds",
                        {{{"batch", 16}, {"seconds", 0.005}}, {{"batch", 1}, {"seconds", 0.002}}}},
                       {"prefill_seconds_per_token", 1e-5}}}});
  fs::create_directories(dir / "empty");
  struct bad_case {
    std::string from, says;
  };
  const std::vector<bad_case> cases = {
      {(dir / "missing").string(), "does not exist"},
      {(dir / "empty").string(), "without result.json"},
      {none, "no workload of it has a serving warm-up model"},
      {disordered, "workload serving.p99.production.512-2048.solo: step cost model: decode "
                   "batches must ascend"},
  };
  for (const auto& c : cases) {
    const auto r =
        run({"run", "--suite", "smoke", "--warm-from", c.from, "--out", (dir / "out").string()});
    SCOPED_TRACE(c.says);
    EXPECT_EQ(r.rc, 2) << r.err;
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("--warm-from"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "out" / "records.jsonl"));
  }
  kg::remove_tree(dir);
}

TEST(run_cli, a_workload_the_engine_cannot_serve_is_refused_before_anything_runs) {
  // nightly's b32 ctx8192 step at batch 64: a valid suite file (its SOL is the model's), but the
  // engine has 32 slots.
  const auto dir = out_dir("unservable");
  fs::create_directories(dir);
  std::ifstream in(std::string(KG_SOURCE_DIR) + "/data/suites/nightly.json");
  auto doc = nlohmann::json::parse(in);
  nlohmann::json w;
  for (const auto& x : doc["workloads"])
    if (x["id"] == "step.decode.solo.b32.ctx8192") w = x;
  ASSERT_FALSE(w.is_null());
  w["id"] = "step.decode.solo.b64.ctx8192";
  w["params"]["batch"] = 64;
  w["sol"]["quantity"] = kg::decode_step_roofline(64, 8192).bytes;
  doc["workloads"] = nlohmann::json::array({w});
  const auto file = dir / "b64.json";
  std::ofstream(file) << doc.dump();
  const auto r = run({"run", "--suite", file.string(), "--dry-run"});
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("step.decode.solo.b64.ctx8192 cannot be served: batch 64"),
            std::string::npos)
      << r.err;
  kg::remove_tree(dir);
}

TEST(run_cli, dry_run_prints_the_run_order_grouped_by_set_up) {
  const auto r = run({"run", "--suite", "smoke", "--dry-run"});
  ASSERT_EQ(r.rc, 0) << r.err;
  // Set-ups in their fixed order, each once.
  const auto kernels = r.out.find("set-up kernels"), whole = r.out.find("set-up engine.whole"),
             training = r.out.find("set-up training.whole");
  ASSERT_NE(kernels, std::string::npos);
  ASSERT_NE(whole, std::string::npos);
  ASSERT_NE(training, std::string::npos);
  EXPECT_LT(kernels, whole);
  EXPECT_LT(whole, training);
  EXPECT_EQ(r.out.find("set-up kernels", kernels + 1), std::string::npos);
  EXPECT_NE(r.out.find("12 workloads, expected"), std::string::npos);
}

TEST(run_cli, without_a_gpu_run_exits_3_with_one_line) {
  if (kg::query_device(0).available) GTEST_SKIP() << "a GPU is present";
  const auto dir = out_dir("nogpu");
  const auto r = run({"run", "--suite", "smoke", "--out", dir.string()});
  EXPECT_EQ(r.rc, 3) << r.err;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("run needs a GPU"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir / "records.jsonl"));
  kg::remove_tree(dir);
}
