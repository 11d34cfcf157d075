// reports/json_schema against the official JSON-Schema-Test-Suite (Debian json-schema-test-suite,
// draft 7: the newest draft that package ships), for every keyword the validator claims. Draft 7
// and 2020-12 agree on these keywords except where a group below is listed with the difference.
// A group whose schema uses something the validator does not implement must be refused as an
// invalid schema, naming it, never answered.
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "reports/json_schema.h"

namespace fs = std::filesystem;

namespace {

const fs::path suite_dir = KG_JSON_SCHEMA_SUITE;

// Groups whose draft-7 expectation is not draft 2020-12's, with why.
const std::map<std::string, std::string> draft_differences = {
    {"ref overrides any sibling keywords",
     "draft 7 ignores keywords beside $ref; 2020-12 applies them"},
    {"$ref prevents a sibling $id from changing the base uri",
     "draft 7 ignores keywords beside $ref; 2020-12 applies them"},
};

bool refused(const std::vector<kg::schema_error>& e) {
  for (const auto& x : e)
    if (x.message.rfind("invalid schema:", 0) == 0) return true;
  return false;
}

struct tally {
  int answered = 0, right = 0, refused_groups = 0;
};

tally run_file(const std::string& keyword) {
  tally t;
  std::ifstream in(suite_dir / (keyword + ".json"));
  EXPECT_TRUE(in) << "missing " << (suite_dir / (keyword + ".json"));
  if (!in) return t;
  const auto groups = nlohmann::json::parse(in);
  for (const auto& g : groups) {
    const std::string group = g.at("description");
    if (draft_differences.count(group)) continue;
    const auto& schema = g.at("schema");
    bool group_refused = false;
    for (const auto& c : g.at("tests")) {
      const auto errors = kg::validate_json(schema, c.at("data"));
      if (refused(errors)) {
        group_refused = true;
        // Refused: only for a keyword it does not implement or a reference it cannot follow.
        const std::string why = errors.front().message;
        EXPECT_TRUE(why.find("is not implemented") != std::string::npos ||
                    why.find("only local $ref") != std::string::npos ||
                    why.find("unresolvable $ref") != std::string::npos)
            << keyword << ": " << group << ": refused for " << why;
        continue;
      }
      ++t.answered;
      const bool valid = errors.empty();
      if (valid == c.at("valid").get<bool>())
        ++t.right;
      else
        ADD_FAILURE() << keyword << ": " << group << ": " << c.at("description").get<std::string>()
                      << ": expected " << (c.at("valid").get<bool>() ? "valid" : "invalid")
                      << (errors.empty() ? "" : ", first error: " + errors.front().message);
    }
    t.refused_groups += group_refused ? 1 : 0;
  }
  return t;
}

} // namespace

TEST(json_schema_suite, every_supported_keyword_agrees_with_the_official_tests) {
  ASSERT_TRUE(fs::is_directory(suite_dir))
      << suite_dir << " is missing: install Debian's json-schema-test-suite (setup.sh does)";
  // The suite's file for each keyword the validator implements (if/then/else share one; draft 7
  // has no prefixItems: its pre-2020 spelling, array-valued items, is in items.json), and the
  // boolean schemas.
  std::set<std::string> keywords = {"boolean_schema"};
  for (const auto k : kg::implemented_schema_keywords()) {
    if (k == "prefixItems") continue;
    keywords.insert(k == "if" || k == "then" || k == "else" ? "if-then-else"
                    : k == "$ref"                           ? "ref"
                                                            : std::string(k));
  }
  EXPECT_EQ(keywords.size(), 24u);
  int answered = 0, right = 0;
  for (const auto& k : keywords) {
    const auto t = run_file(k);
    // Every keyword's own file is mostly answered: refusals are the odd group that leans on a
    // keyword of another file.
    EXPECT_GT(t.answered, 0) << k;
    std::cout << k << ": " << t.right << " of " << t.answered << " answered right, "
              << t.refused_groups << " groups refused\n";
    answered += t.answered;
    right += t.right;
  }
  std::cout << "in all: " << right << " of " << answered << " right\n";
  EXPECT_EQ(right, answered);
  EXPECT_GT(answered, 250); // (291 with the Debian package's draft 7 files)
}

// Keywords of the suite the validator does not implement are refused wherever they sit.
TEST(json_schema_suite, unimplemented_keywords_are_refused) {
  for (const char* k : {"uniqueItems", "contains", "multipleOf", "propertyNames", "minProperties",
                        "maxProperties", "dependencies", "additionalItems"}) {
    std::ifstream in(suite_dir / (std::string(k) + ".json"));
    ASSERT_TRUE(in) << k;
    const auto groups = nlohmann::json::parse(in);
    int refused_cases = 0;
    for (const auto& g : groups) {
      if (g.at("schema").dump().find("\"" + std::string(k) + "\"") == std::string::npos)
        continue; // a group of the file that does not use the keyword
      for (const auto& c : g.at("tests")) {
        const auto e = kg::validate_json(g.at("schema"), c.at("data"));
        ASSERT_TRUE(refused(e)) << k << ": " << g.at("description") << " was answered";
        ++refused_cases;
      }
    }
    EXPECT_GT(refused_cases, 0) << k;
  }
  // Nested too, in a branch no document reaches.
  const auto nested =
      nlohmann::json::parse(R"({"anyOf": [true, {"properties": {"x": {"uniqueItems": true}}}]})");
  const auto e = kg::validate_json(nested, 1);
  ASSERT_TRUE(refused(e));
  EXPECT_NE(e.front().message.find("\"uniqueItems\" at #/anyOf/1/properties/x "), std::string::npos)
      << e.front().message;
}
