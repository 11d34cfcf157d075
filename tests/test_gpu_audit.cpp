// GPU: `kernelgate audit checker --protocol all` on the real mutants of two task kernels (relu and
// the LayerNorm of the first audit): every protocol accepts the correct kernels, and the mutant
// that drops LayerNorm's bias is witnessed (the witness plan draws the bias from N(0,1)), killed
// by strict and let through by kernelbench (its bias stays at the default init, zeros).
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "gpu_test_support.h"
#include "mutants/kill_matrix.h"
#include "scratch_dir.h"
#include "suite/exit_codes.h"

using namespace kg;
namespace fs = std::filesystem;

TEST(gpu_audit, protocols_accept_the_controls_and_only_strict_kills_the_omitted_bias) {
  KG_REQUIRE_GPU();
  ::setenv("KERNELGATE_WORKER", KG_KERNELGATE_BIN, 1);
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
                                (base / "catalog").string(), "--workers", "2", "--out",
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
