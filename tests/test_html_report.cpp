// The HTML report's page without a browser (ctest report.html_in_chromium loads it in one):
// strings from results escaped, nothing to fetch, and bad input as one-line report_errors.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

#include "reports/html_report.h"
#include "scratch_dir.h"

namespace kg {
namespace {

namespace fs = std::filesystem;

const fs::path fixtures = fs::path(KG_SOURCE_DIR) / "tests" / "fixtures" / "reports";

fs::path write(const std::string& name, const std::string& text) {
  const auto p = test::scratch_dir("html-report") / name;
  std::ofstream(p) << text;
  return p;
}

std::string error_of(const std::vector<fs::path>& results,
                     const std::optional<fs::path>& baseline = std::nullopt) {
  try {
    html_report(results, baseline);
  } catch (const report_error& e) {
    return e.what();
  }
  return "no error";
}

TEST(html_report, a_suite_run_against_its_baseline_escapes_every_id) {
  const auto page = html_report({fixtures / "suite_new.json"}, fixtures / "suite_base.json");
  // suite_new.json holds the id kernel.<b>gemv</b>&amp;.x"y: it must show as text, never markup.
  EXPECT_NE(page.find("kernel.&lt;b&gt;gemv&lt;/b&gt;&amp;amp;.x&quot;y"), std::string::npos);
  EXPECT_EQ(page.find("<b>gemv"), std::string::npos);
  // Self-contained: no script, and no URL but the SVG namespace's name.
  EXPECT_EQ(page.find("<script"), std::string::npos);
  std::string rest = page;
  for (std::size_t at; (at = rest.find("http://www.w3.org/2000/svg")) != std::string::npos;)
    rest.erase(at, 26);
  EXPECT_EQ(rest.find("http://"), std::string::npos);
  EXPECT_EQ(rest.find("https://"), std::string::npos);
  // The decisions are compare's: 12% slower gemv.down is SLOWER, and the forest plot is drawn.
  EXPECT_NE(page.find("SLOWER"), std::string::npos);
  EXPECT_NE(page.find("Forest plot"), std::string::npos);
  EXPECT_NE(page.find("@media print"), std::string::npos);
}

TEST(html_report, a_suite_run_shows_each_colocated_workload_as_a_fraction_of_solo) {
  auto doc = nlohmann::json::parse(std::ifstream(fixtures / "suite_base.json"));
  nlohmann::json co;
  for (const auto& r : doc["records"])
    if (r["id"] == "serving.throughput.production.log512-8192.solo") co = r;
  ASSERT_FALSE(co.is_null());
  co["id"] = "serving.throughput.production.log512-8192.<i>lora16</i>";
  co["params"]["tenant"] = "lora16";
  double solo = 0;
  for (const auto& v : co["samples"])
    solo += v.get<double>() / 3.0;
  co["samples"] = {solo / 4, solo / 4, solo / 4}; // a quarter of solo's mean, every trace
  doc["records"].push_back(co);
  const auto page = html_report({write("suite_colocated.json", doc.dump())}, std::nullopt);
  EXPECT_NE(page.find("Sharing the GPU: fractions of solo"), std::string::npos);
  EXPECT_NE(page.find("log512-8192.&lt;i&gt;lora16&lt;/i&gt;"), std::string::npos);
  EXPECT_EQ(page.find("<i>lora16"), std::string::npos);
  EXPECT_NE(page.find("<td>0.25</td>"), std::string::npos) << page.substr(page.find("colocation"));
}

TEST(html_report, bad_input_is_one_line_naming_the_file) {
  const auto malformed = write("malformed.json", "{\"kind\": ");
  const auto time = write("time.json", R"({"schema": "kernelgate.result/1", "kind": "time"})");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {error_of({malformed}), malformed.string()},
      {error_of({time}), "kind 'time' has no report"},
      {error_of({test::scratch_dir("html-report") / "absent.json"}), "absent.json"},
      {error_of({fixtures / "suite_new.json"}, fixtures / "eval_result.json"),
       "--baseline must be a suite run"},
      {error_of({}), "no result given"}};
  for (const auto& [got, want] : cases) {
    EXPECT_NE(got.find(want), std::string::npos) << got;
    EXPECT_EQ(got.find('\n'), std::string::npos) << got;
  }
}

// A fastp result of several candidates (an eval of a red team): a row per candidate with its
// counts, a curve only for a candidate with a correct task, the others named in one line, and
// the best fast_1 as the headline. Hand-made: a 1/2 fast at p = 1, b and c nothing correct.
TEST(html_report, fastp_of_many_candidates_leads_with_a_table) {
  auto candidate = [](const std::string& name, int correct, double f1) {
    return std::make_pair(
        nlohmann::json{{"candidate", name},
                       {"tasks",
                        {{"intended", 2},
                         {"aligned", 2},
                         {"correct", correct},
                         {"incorrect", 2 - correct},
                         {"missing", 0},
                         {"excluded", 0}}},
                       {"geomean_speedup", {{"value", nullptr}}},
                       {"exclusions", nlohmann::json::array()},
                       {"missing", nlohmann::json::array()}},
        nlohmann::json{{"type", "fast_p"},
                       {"candidate", name},
                       {"id", "fast_p/" + name + "/p=1"},
                       {"p", 1.0},
                       {"result",
                        {{"fast", f1 * 2},
                         {"fast_p_intended", f1},
                         {"fast_p_aligned", f1},
                         {"ci95_intended", {0.0, 1.0}},
                         {"ci95_aligned", {0.0, 1.0}}}}});
  };
  nlohmann::json doc = {{"schema", "kernelgate.result/1"},
                        {"kind", "fastp"},
                        {"summary", {{"candidates", nlohmann::json::array()}}},
                        {"records", nlohmann::json::array()}};
  for (const auto& [c, r] : {candidate("cand_a", 1, 0.5), candidate("cand_b", 0, 0.0),
                             candidate("cand_c", 0, 0.0)}) {
    doc["summary"]["candidates"].push_back(c);
    doc["records"].push_back(r);
  }
  const auto page = html_report({write("fastp_many.json", doc.dump())}, std::nullopt, std::nullopt);
  for (const char* name : {"cand_a", "cand_b", "cand_c"})
    EXPECT_NE(page.find(std::string("<code>") + name + "</code>"), std::string::npos) << name;
  EXPECT_NE(page.find("fast_p of cand_a"), std::string::npos);
  EXPECT_EQ(page.find("fast_p of cand_b"), std::string::npos);
  EXPECT_NE(page.find("2 candidates have no correct task"), std::string::npos);
  EXPECT_NE(page.find("best of 3 candidates: cand_a: 0.5 intended"), std::string::npos);
}

} // namespace
} // namespace kg
