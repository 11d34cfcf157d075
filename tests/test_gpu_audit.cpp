// GPU: `kernelgate audit checker --protocol all` on the real mutants of two task kernels (relu and
// the LayerNorm of the first audit): every protocol accepts the correct kernels, and the mutant
// that drops LayerNorm's bias is witnessed (the witness plan draws the bias from N(0,1)), killed
// by strict and let through by kernelbench (its bias stays at the default init, zeros).
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "gpu_test_support.h"
#include "mutants/kill_matrix.h"
#include "sandbox/candidate_compiler.h"
#include "sandbox/process.h"
#include "scratch_dir.h"
#include "suite/exit_codes.h"

using namespace kg;
namespace fs = std::filesystem;

// The worker's per-call limit: a kernel that never finishes ends the worker with code 6 soon
// after the limit, the trials before it reported, instead of holding it until the parent's
// timeout. The trials: a relu input of 1024 floats, twice; the first call is made to hang
// (red_team/relu/hangs.cu), so none is reported.
TEST(gpu_audit, the_worker_cuts_a_hanging_call_at_its_limit) {
  KG_REQUIRE_GPU();
  const auto base = kg::test::scratch_dir("gpu-audit-hang");
  compile_options co;
  co.cache_dir = base / "cache";
  const auto c = compile_candidate(fs::path(KG_SOURCE_DIR) / "tests/red_team/relu/hangs.cu", co);
  ASSERT_TRUE(c.ok) << c.log;
  std::vector<char> zeros(1024 * sizeof(float), 0);
  std::ofstream(base / "x.bin", std::ios::binary).write(zeros.data(), zeros.size());
  nlohmann::json trial = {
      {"inputs", {{{"file", (base / "x.bin").string()}, {"dtype", 0}, {"shape", {1024}}}}},
      {"outputs", {{{"file", (base / "y.bin").string()}, {"dtype", 0}, {"shape", {1024}}}}}};
  const nlohmann::json manifest = {{"shared_object", c.shared_object.string()},
                                   {"result", (base / "result.json").string()},
                                   {"trial_limit_seconds", 1.0},
                                   {"trials", {trial, trial}}};
  std::ofstream(base / "manifest.json") << manifest.dump();
  process_limits limits;
  limits.timeout_seconds = 60;
  const auto r = run_process({KG_KERNELGATE_BIN, "worker", (base / "manifest.json").string()},
                             base / "worker.log", limits);
  EXPECT_TRUE(r.exited) << r.describe();
  EXPECT_EQ(r.exit_code, 6) << r.describe();
  EXPECT_LT(r.seconds, 10.0); // the limit, the context's teardown with a kernel still running
  std::ifstream log(base / "worker.log");
  const std::string text{std::istreambuf_iterator<char>(log), {}};
  EXPECT_NE(text.find("trial 0 ran past its limit of 1.00 s"), std::string::npos) << text;
}

TEST(gpu_audit, protocols_accept_the_controls_and_only_strict_kills_the_omitted_bias) {
  KG_REQUIRE_GPU();
  ::setenv("KERNELGATE_WORKER", KG_WORKER_BIN, 1); // the slim worker, as kernelgate picks it
  const auto base = kg::test::scratch_dir("gpu-audit");
  const auto g = kg::test::run({"mutants", "generate", "--kernels", "kernels/tasks/relu.cu",
                                "--kernels", "kernels/tasks/layernorm_affine_fp32.cu", "--out",
                                (base / "catalog").string()});
  ASSERT_EQ(g.rc, exit_code::ok) << g.err;
  std::string omit_bias;
  std::ifstream cat(base / "catalog" / "catalog.jsonl");
  for (std::string line; std::getline(cat, line);) {
    const auto m = nlohmann::json::parse(line);
    if (m.at("rule") == "omit_bias" && m.at("task") == "layernorm_affine_fp32") omit_bias = m["id"];
  }
  ASSERT_FALSE(omit_bias.empty());
  const auto r = kg::test::run({"audit", "checker", "--protocol", "all", "--catalog",
                                (base / "catalog").string(), "--workers", "4", "--out",
                                (base / "out").string()});
  std::cout << r.out << r.err;
  EXPECT_EQ(r.rc, exit_code::ok);
  std::ifstream in(base / "out" / "kill_matrix.json");
  const auto km = kill_matrix::from_json(nlohmann::json::parse(in));
  for (const auto& c : km.checkers())
    EXPECT_TRUE(km.false_rejections(c).empty()) << c;
  const auto& row = km.rows().at(km.row_index(omit_bias));
  EXPECT_EQ(row.status, witness_status::witnessed);
  EXPECT_EQ(km.at(omit_bias, "strict"), kill_verdict::killed);
  EXPECT_EQ(km.at(omit_bias, "kernelbench"), kill_verdict::survived);
  // Strict lets through under 1% of the witnessed mutants.
  const auto s = km.score("strict");
  EXPECT_LT(s.escape_rate(), 0.01) << s.to_json().dump();
  std::ifstream sj(base / "out" / "summary.json");
  const auto summary = nlohmann::json::parse(sj);
  EXPECT_GT(summary.at("phases_seconds").at("witness_and_protocols").get<double>(), 0.0);
}
