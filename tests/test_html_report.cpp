// The HTML report's page without a browser (ctest report.html_in_chromium loads it in one):
// strings from results escaped, nothing to fetch, and bad input as one-line report_errors.
#include <gtest/gtest.h>

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

} // namespace
} // namespace kg
