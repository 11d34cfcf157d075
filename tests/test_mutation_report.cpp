// The mutation-testing report of one checker (reports/mutation_report.h): every witness status and
// verdict mapped to the format's status, locations worked out by hand, and the whole report valid
// against data/schema/mutation-report.schema.json.
#include <algorithm>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "mutants/kill_matrix.h"
#include "mutants/mutant_catalog.h"
#include "reports/json_schema.h"
#include "reports/mutation_report.h"

using namespace kg;
using json = nlohmann::json;

namespace {

const std::string source = "__global__ void add(const float* a, float* y, int n) {\n"
                           "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                           "  if (i < n) y[i] = a[i] + 1.0f;\n"
                           "}\n";
const std::string path = "kernels/tasks/add.cu";

json schema() {
  std::ifstream in(std::string(KG_SOURCE_DIR) + "/data/schema/mutation-report.schema.json");
  return json::parse(in);
}

const json& mutant_in(const json& report, const std::string& id) {
  for (const auto& m : report["files"][path]["mutants"])
    if (m["id"] == id) return m;
  throw std::runtime_error("no mutant " + id);
}

} // namespace

TEST(mutation_report, maps_every_status_and_validates_against_the_format) {
  const auto catalog = generate_mutants(source, path, "add");
  ASSERT_GE(catalog.size(), 9u);
  // The '<' of "i < n": a boundary mutant at line 3; its column is where '<' sits (1-based).
  const auto lt = std::find_if(catalog.begin(), catalog.end(), [](const mutant& m) {
    return m.original == "<" && m.replacement == "<=";
  });
  ASSERT_NE(lt, catalog.end());
  EXPECT_EQ(lt->line, 3);
  EXPECT_EQ(lt->column, 9); // "  if (i < n)": '<' is the 9th byte

  // Nine of the mutants in the matrix, one for each outcome; the others left out of it.
  const std::vector<std::pair<witness_status, kill_verdict>> cases = {
      {witness_status::witnessed, kill_verdict::killed},
      {witness_status::witnessed, kill_verdict::survived},
      {witness_status::witnessed, kill_verdict::error},
      {witness_status::witnessed, kill_verdict::timeout},
      {witness_status::witnessed, kill_verdict::missing},
      {witness_status::compile_error, kill_verdict::missing},
      {witness_status::equivalent, kill_verdict::missing},
      {witness_status::unwitnessed, kill_verdict::survived},
      {witness_status::not_run, kill_verdict::missing},
  };
  const std::vector<std::string> want = {"Killed",  "Survived",   "RuntimeError",
                                         "Timeout", "NoCoverage", "CompileError",
                                         "Ignored", "Ignored",    "Pending"};
  std::vector<kill_row> rows;
  for (std::size_t i = 0; i < cases.size(); ++i)
    rows.push_back({catalog[i].id, catalog[i].family, "add", cases[i].first, false});
  kill_matrix km(rows, {"kernelbench"});
  for (std::size_t i = 0; i < cases.size(); ++i)
    km.set(catalog[i].id, "kernelbench", cases[i].second);

  const auto report = mutation_report(km, "kernelbench", catalog, {{path, source}});
  EXPECT_TRUE(validate_json(schema(), report).empty()) << report.dump(1).substr(0, 2000);
  EXPECT_EQ(report["files"][path]["source"], source);
  EXPECT_EQ(report["files"][path]["mutants"].size(), cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& m = mutant_in(report, catalog[i].id);
    EXPECT_EQ(m["status"], want[i]) << i;
    EXPECT_EQ(m["mutatorName"], catalog[i].family + "/" + catalog[i].rule);
    EXPECT_EQ(m["replacement"], catalog[i].replacement);
    // A single-line original: the end is its start plus its length, exclusive.
    EXPECT_EQ(m["location"]["end"]["line"], catalog[i].line);
    EXPECT_EQ(m["location"]["end"]["column"],
              catalog[i].column + static_cast<int>(catalog[i].original.size()));
  }
  EXPECT_NE(mutant_in(report, catalog[6].id)["statusReason"].get<std::string>().find("equivalent"),
            std::string::npos);
  EXPECT_NE(mutant_in(report, catalog[7].id)["statusReason"].get<std::string>().find("unwitnessed"),
            std::string::npos);

  // A report the format refuses: a status outside its list, a column 0.
  auto bad = report;
  bad["files"][path]["mutants"][0]["status"] = "Escaped";
  EXPECT_FALSE(validate_json(schema(), bad).empty());
  bad = report;
  bad["files"][path]["mutants"][0]["location"]["start"]["column"] = 0;
  EXPECT_FALSE(validate_json(schema(), bad).empty());
  bad = report;
  bad.erase("thresholds");
  EXPECT_FALSE(validate_json(schema(), bad).empty());
}

TEST(mutation_report, refuses_sources_that_do_not_match_the_catalog) {
  const auto catalog = generate_mutants(source, path, "add");
  kill_matrix km({{catalog[0].id, catalog[0].family, "add", witness_status::witnessed, false}},
                 {"strict"});
  EXPECT_THROW(mutation_report(km, "strict", catalog, {}), std::invalid_argument);
  std::string edited = source;
  edited.insert(0, "// a new first line\n");
  EXPECT_THROW(mutation_report(km, "strict", catalog, {{path, edited}}), std::invalid_argument);
  EXPECT_THROW(mutation_report(km, "kbv", catalog, {{path, source}}), std::out_of_range);
}
