#include <gtest/gtest.h>

#include "mutants/affine_formula.h"
#include "mutants/outcome_matrix.h"

using namespace kg;

TEST(outcome_matrix, planned_observations_stay_missing_until_resolved) {
  outcome_matrix m({"a", "b"}, {"x", "y"});
  m.plan("a", "x", 3);
  m.resolve("a", "x", outcome::accepted);
  m.resolve("a", "x", outcome::error);
  EXPECT_EQ(m.cell("a", "x").accepted, 1);
  EXPECT_EQ(m.cell("a", "x").error, 1);
  EXPECT_EQ(m.cell("a", "x").missing, 1); // unknown, not failed
  EXPECT_EQ(m.total().total(), 3);
  EXPECT_THROW(m.resolve("b", "y", outcome::rejected), std::logic_error); // never planned
  EXPECT_THROW(m.plan("c", "x"), std::out_of_range);
  EXPECT_EQ(m.to_json()["a"]["x"]["missing"], 1);
}

TEST(affine_formula, catalog_has_six_altered_formulas) {
  ASSERT_EQ(altered_formulas().size(), 6u);
  EXPECT_EQ(altered_formulas()[0].name, "omit_all");
  EXPECT_EQ(parse_affine_formula("omit_bias"), affine_formula::omit_bias);
  EXPECT_FALSE(parse_affine_formula("nope").has_value());
  for (const auto& f : altered_formulas())
    EXPECT_EQ(f.family, "parameter-use");
}
