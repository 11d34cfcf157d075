// End to end: `kernelgate audit layernorm-affine --backend cpu` reproduces the expected table of
// docs/architecture.md (The LayerNorm affine ablation)
// exactly, and its result.json validates and names every input's hash.
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <unistd.h>

#include <gtest/gtest.h>

#include "audit_expectations.h"
#include "reports/json_schema.h"
#include "reports/remove_tree.h"
#include "reports/result_schema.h"
#include "suite/cli.h"

using namespace kg;
namespace fs = std::filesystem;

class cpu_audit : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("kg_cpu_audit_" + std::to_string(getpid()));
    kg::remove_tree(dir_);
    std::ostringstream out, err;
    rc_ = kernelgate_main(
        {"kernelgate", "audit", "layernorm-affine", "--backend", "cpu", "--out", dir_.string()},
        out, err);
    stdout_ = out.str();
    stderr_ = err.str();
    std::ifstream f(dir_ / "result.json");
    if (f) doc_ = nlohmann::json::parse(f);
  }
  static void TearDownTestSuite() { kg::remove_tree(dir_); }
  static inline fs::path dir_;
  static inline int rc_ = -1;
  static inline std::string stdout_, stderr_;
  static inline nlohmann::json doc_;
};

TEST_F(cpu_audit, exits_zero_and_prints_the_totals_line) {
  EXPECT_EQ(rc_, 0) << stderr_;
  EXPECT_NE(stdout_.find("Totals: 216 accepted (72 controls included), 288 rejected, 0 errors, 0 "
                         "missing (504 planned)."),
            std::string::npos)
      << stdout_;
  EXPECT_NE(stdout_.find("Controls: 72/72 accepted."), std::string::npos);
}

TEST_F(cpu_audit, reproduces_the_target_table_and_the_preset_table) {
  ASSERT_FALSE(doc_.is_null());
  const auto bad = kg::testing::check_layernorm_summary(doc_["summary"]);
  for (const auto& b : bad)
    ADD_FAILURE() << b;
}

TEST_F(cpu_audit, float16_verdicts_do_not_depend_on_the_normalization_path) {
  const auto& c = doc_["summary"]["float16_path_check"];
  ASSERT_TRUE(c.is_object());
  EXPECT_EQ(c["float16_observations_compared"], 9 * 4 * 9); // 9 fp16 configs x 4 x 9 outputs
  EXPECT_EQ(c["verdicts_differing"], 0) << c.dump();
  EXPECT_NE(c["primary"], c["alternative"]);
}

TEST_F(cpu_audit, result_validates_and_every_observation_names_its_input_hashes) {
  const auto errors = validate_json(nlohmann::json::parse(result_schema_text()), doc_);
  for (const auto& e : errors)
    ADD_FAILURE() << e.path << ": " << e.message;
  int grid = 0, extra = 0, presets = 0;
  for (const auto& r : doc_["records"]) {
    if (r["type"] == "observation") {
      (r["section"] == "grid" ? grid : extra)++;
      for (const auto& k : {"x", "weight", "bias"})
        EXPECT_EQ(r["inputs"][k]["sha256"].get<std::string>().size(), 64u);
    } else {
      ++presets;
    }
  }
  EXPECT_EQ(grid, 504);
  EXPECT_EQ(extra, 144);
  EXPECT_EQ(presets, 6 * 18 * 9);
  // records.jsonl holds the same records, one per line.
  std::ifstream f(dir_ / "records.jsonl");
  std::size_t lines = 0;
  for (std::string l; std::getline(f, l);)
    ++lines;
  EXPECT_EQ(lines, doc_["records"].size());
}

TEST_F(cpu_audit, identical_inputs_give_identical_hashes_across_regimes) {
  // The regimes reuse one draw of x per configuration: its hash must repeat, the varied weight
  // must differ from the identity weight.
  std::map<std::string, std::set<std::string>> x_by_config, w_by_regime;
  for (const auto& r : doc_["records"]) {
    if (r["type"] != "observation") continue;
    x_by_config[r["config"].dump()].insert(r["inputs"]["x"]["sha256"]);
    w_by_regime[r["config"].dump() + r["regime"].get<std::string>()].insert(
        r["inputs"]["weight"]["sha256"]);
  }
  EXPECT_EQ(x_by_config.size(), 18u);
  for (const auto& [k, v] : x_by_config)
    EXPECT_EQ(v.size(), 1u) << k;
  for (const auto& [k, v] : w_by_regime)
    EXPECT_EQ(v.size(), 1u) << k;
}
