#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "reports/json_schema.h"

using namespace kg;
using nlohmann::json;

namespace {

std::vector<schema_error> check(const char* schema, const char* document) {
  return validate_json(json::parse(schema), json::parse(document));
}

bool valid(const char* schema, const char* document) {
  return check(schema, document).empty();
}

std::vector<std::string> paths(const std::vector<schema_error>& errors) {
  std::vector<std::string> out;
  for (const auto& e : errors)
    out.push_back(e.path);
  return out;
}

bool mentions(const std::vector<schema_error>& errors, const std::string& text) {
  for (const auto& e : errors)
    if (e.message.find(text) != std::string::npos) return true;
  return false;
}

} // namespace

TEST(json_schema, empty_and_boolean_schemas) {
  EXPECT_TRUE(valid("{}", R"({"anything": [1, 2]})"));
  EXPECT_TRUE(valid("true", "null"));
  EXPECT_FALSE(valid("false", "null"));
}

TEST(json_schema, type_single_and_list) {
  EXPECT_TRUE(valid(R"({"type": "string"})", R"("x")"));
  EXPECT_FALSE(valid(R"({"type": "string"})", "1"));
  EXPECT_TRUE(valid(R"({"type": ["string", "null"]})", "null"));
  EXPECT_FALSE(valid(R"({"type": ["string", "null"]})", "true"));
  EXPECT_TRUE(valid(R"({"type": "object"})", "{}"));
  EXPECT_FALSE(valid(R"({"type": "object"})", "[]"));
  EXPECT_TRUE(valid(R"({"type": "array"})", "[]"));
  EXPECT_TRUE(valid(R"({"type": "boolean"})", "false"));
  EXPECT_FALSE(valid(R"({"type": "boolean"})", "0"));
  EXPECT_FALSE(valid(R"({"type": "null"})", "0"));
  const auto e = check(R"({"type": ["string", "null"]})", "7");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].path, "");
  EXPECT_EQ(e[0].message, "expected type string or null, got integer");
}

TEST(json_schema, integer_versus_number) {
  EXPECT_TRUE(valid(R"({"type": "integer"})", "3"));
  EXPECT_TRUE(valid(R"({"type": "integer"})", "-3"));
  EXPECT_TRUE(valid(R"({"type": "integer"})", "18446744073709551615"));
  EXPECT_TRUE(valid(R"({"type": "integer"})", "3.0")); // integral by value
  EXPECT_FALSE(valid(R"({"type": "integer"})", "3.5"));
  EXPECT_FALSE(valid(R"({"type": "integer"})", R"("3")"));
  EXPECT_TRUE(valid(R"({"type": "number"})", "3"));
  EXPECT_TRUE(valid(R"({"type": "number"})", "3.5"));
  EXPECT_FALSE(valid(R"({"type": "number"})", "true"));
}

TEST(json_schema, enum_and_const) {
  const char* e = R"({"enum": ["pass", "fail", 1, null, [1, 2]]})";
  EXPECT_TRUE(valid(e, R"("pass")"));
  EXPECT_TRUE(valid(e, "1.0")); // numeric equality ignores int/float spelling
  EXPECT_TRUE(valid(e, "null"));
  EXPECT_TRUE(valid(e, "[1, 2]"));
  EXPECT_FALSE(valid(e, R"("PASS")"));
  EXPECT_FALSE(valid(e, "[2, 1]"));
  EXPECT_TRUE(valid(R"({"const": {"a": 1}})", R"({"a": 1})"));
  EXPECT_FALSE(valid(R"({"const": {"a": 1}})", R"({"a": 2})"));
  EXPECT_FALSE(valid(R"({"const": "kernelgate.result/1"})", R"("kernelgate.result/2")"));
}

TEST(json_schema, numeric_bounds) {
  const char* s = R"({"minimum": 0, "maximum": 10})";
  EXPECT_TRUE(valid(s, "0"));
  EXPECT_TRUE(valid(s, "10"));
  EXPECT_TRUE(valid(s, "5.5"));
  EXPECT_FALSE(valid(s, "-1"));
  EXPECT_FALSE(valid(s, "10.01"));
  EXPECT_TRUE(valid(s, R"("not a number")")); // numeric keywords ignore other types
  EXPECT_TRUE(valid(R"({"exclusiveMinimum": 0})", "0.001"));
  EXPECT_FALSE(valid(R"({"exclusiveMinimum": 0})", "0"));
  EXPECT_TRUE(valid(R"({"exclusiveMaximum": 1})", "0.999"));
  EXPECT_FALSE(valid(R"({"exclusiveMaximum": 1})", "1"));
  const auto e = check(s, "11");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].message, "11 is greater than maximum 10");
}

TEST(json_schema, string_length_and_pattern) {
  EXPECT_TRUE(valid(R"({"minLength": 2})", R"("ab")"));
  EXPECT_FALSE(valid(R"({"minLength": 2})", R"("a")"));
  EXPECT_TRUE(valid(R"({"minLength": 2, "maxLength": 2})", "\"\xc3\xa9\xc3\xa9\"")); // code points
  EXPECT_FALSE(valid(R"({"maxLength": 1})", R"("ab")"));
  EXPECT_TRUE(valid(R"({"minLength": 5})", "12")); // ignored for non-strings
  // Unanchored patterns search anywhere in the string.
  EXPECT_TRUE(valid(R"({"pattern": "b+"})", R"("abbbc")"));
  EXPECT_FALSE(valid(R"({"pattern": "^b+$"})", R"("abbbc")"));
  const char* sha = R"({"type": "string", "pattern": "^[0-9a-f]{64}$"})";
  EXPECT_TRUE(valid(sha, R"("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")"));
  EXPECT_FALSE(valid(sha, R"("E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855")"));
  EXPECT_FALSE(valid(sha, R"("e3b0")"));
}

TEST(json_schema, object_properties_and_required) {
  const char* s = R"({
    "type": "object",
    "required": ["name", "count"],
    "properties": {"name": {"type": "string"}, "count": {"type": "integer", "minimum": 0}}
  })";
  EXPECT_TRUE(valid(s, R"({"name": "x", "count": 2, "extra": true})"));
  const auto e = check(s, R"({"count": -1})");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].path, "");
  EXPECT_EQ(e[0].message, "missing required property \"name\"");
  EXPECT_EQ(e[1].path, "/count");
  EXPECT_FALSE(valid(s, "[]")); // type still applies, required does not
  EXPECT_TRUE(valid(R"({"required": ["a"]})", "[]"));
}

TEST(json_schema, additional_properties) {
  const char* closed = R"({"properties": {"a": {}}, "additionalProperties": false})";
  EXPECT_TRUE(valid(closed, R"({"a": 1})"));
  const auto e = check(closed, R"({"a": 1, "b": 2, "c": 3})");
  EXPECT_EQ(paths(e), (std::vector<std::string>{"/b", "/c"}));
  const char* typed = R"({"properties": {"a": {}}, "additionalProperties": {"type": "number"}})";
  EXPECT_TRUE(valid(typed, R"({"a": "s", "b": 2})"));
  EXPECT_EQ(paths(check(typed, R"({"a": "s", "b": "t"})")), std::vector<std::string>{"/b"});
  const char* by_pattern =
      R"({"patternProperties": {"^x_": {"type": "integer"}}, "additionalProperties": false})";
  EXPECT_TRUE(valid(by_pattern, R"({"x_a": 1})"));
  EXPECT_EQ(paths(check(by_pattern, R"({"x_a": 1.5, "y": 1})")),
            (std::vector<std::string>{"/x_a", "/y"}));
}

TEST(json_schema, arrays) {
  const char* s =
      R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3})";
  EXPECT_TRUE(valid(s, "[1, 2, 3]"));
  EXPECT_FALSE(valid(s, "[]"));
  EXPECT_FALSE(valid(s, "[1, 2, 3, 4]"));
  EXPECT_EQ(paths(check(s, R"([1, "a", 2, null])")),
            (std::vector<std::string>{"", "/1", "/3"})); // maxItems, then the two bad items
  const char* tuple = R"({"prefixItems": [{"type": "string"}, {"type": "number"}],
                          "items": {"type": "boolean"}})";
  EXPECT_TRUE(valid(tuple, R"(["a", 1, true, false])"));
  EXPECT_TRUE(valid(tuple, R"(["a"])"));
  EXPECT_EQ(paths(check(tuple, R"([1, "a", 3])")), (std::vector<std::string>{"/0", "/1", "/2"}));
  const char* closed_tuple = R"({"prefixItems": [{}], "items": false})";
  EXPECT_TRUE(valid(closed_tuple, "[1]"));
  EXPECT_EQ(paths(check(closed_tuple, "[1, 2]")), std::vector<std::string>{"/1"});
}

TEST(json_schema, all_any_not) {
  const char* all = R"({"allOf": [{"type": "integer"}, {"minimum": 5}, {"maximum": 3}]})";
  EXPECT_EQ(check(all, "4").size(), 2u); // reports every failing branch
  EXPECT_TRUE(valid(R"({"allOf": [{"type": "integer"}, {"minimum": 5}]})", "6"));
  const char* any = R"({"anyOf": [{"type": "string"}, {"minimum": 10}]})";
  EXPECT_TRUE(valid(any, R"("s")"));
  EXPECT_TRUE(valid(any, "11"));
  const auto e = check(any, "1");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_TRUE(mentions(e, "anyOf"));
  EXPECT_TRUE(valid(R"({"not": {"type": "string"}})", "1"));
  EXPECT_FALSE(valid(R"({"not": {"type": "string"}})", R"("s")"));
}

TEST(json_schema, one_of_requires_exactly_one) {
  const char* s = R"({"oneOf": [{"type": "integer"}, {"minimum": 2}]})";
  EXPECT_TRUE(valid(s, "1"));   // integer only
  EXPECT_TRUE(valid(s, "2.5")); // minimum only
  const auto both = check(s, "3");
  ASSERT_EQ(both.size(), 1u);
  EXPECT_TRUE(mentions(both, "matches 2 schemas in oneOf (indices 0, 1)"));
  const auto none = check(s, "1.5");
  ASSERT_EQ(none.size(), 1u);
  EXPECT_TRUE(mentions(none, "none of the 2 schemas in oneOf"));
}

TEST(json_schema, if_then_else) {
  // Mirrors the result schema: a failing verdict must carry a reason.
  const char* s = R"({
    "if": {"properties": {"verdict": {"const": "fail"}}, "required": ["verdict"]},
    "then": {"required": ["reason"]},
    "else": {"properties": {"reason": {"type": "null"}}}
  })";
  EXPECT_TRUE(valid(s, R"({"verdict": "fail", "reason": "nan"})"));
  EXPECT_FALSE(valid(s, R"({"verdict": "fail"})"));
  EXPECT_TRUE(valid(s, R"({"verdict": "pass"})"));
  EXPECT_EQ(paths(check(s, R"({"verdict": "pass", "reason": "x"})")),
            std::vector<std::string>{"/reason"});
  EXPECT_TRUE(valid(R"({"if": {"type": "string"}, "then": {"minLength": 3}})", "5"));
  EXPECT_FALSE(valid(R"({"if": {"type": "string"}, "then": {"minLength": 3}})", R"("ab")"));
}

TEST(json_schema, nested_refs_and_error_paths) {
  const char* s = R"({
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "test", "title": "t", "description": "d",
    "type": "object",
    "properties": {"records": {"type": "array", "items": {"$ref": "#/$defs/record"}}},
    "$defs": {
      "record": {
        "type": "object",
        "required": ["verdict", "input"],
        "properties": {"verdict": {"enum": ["pass", "fail"]}, "input": {"$ref": "#/$defs/tensor"}}
      },
      "tensor": {"properties": {"sha256": {"$ref": "#/definitions/sha"}}}
    },
    "definitions": {"sha": {"type": "string", "minLength": 4}}
  })";
  EXPECT_TRUE(valid(s, R"({"records": [{"verdict": "pass", "input": {"sha256": "abcd"}}]})"));
  const auto e = check(s, R"({"records": [
      {"verdict": "pass", "input": {"sha256": "abcd"}},
      {"verdict": "maybe", "input": {"sha256": "ab"}},
      {"input": {"sha256": 5}}]})");
  // nlohmann::json keeps object keys sorted, so "input" is visited before "verdict".
  EXPECT_EQ(paths(e), (std::vector<std::string>{"/records/1/input/sha256", "/records/1/verdict",
                                                "/records/2", "/records/2/input/sha256"}));
}

TEST(json_schema, recursive_ref_to_root) {
  const char* tree = R"({"type": "object", "properties": {"kids": {"items": {"$ref": "#"}}},
                         "required": ["v"]})";
  EXPECT_TRUE(valid(tree, R"({"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}]})"));
  EXPECT_EQ(paths(check(tree, R"({"v": 1, "kids": [{"v": 2, "kids": [{}]}]})")),
            std::vector<std::string>{"/kids/0/kids/0"});
}

TEST(json_schema, pointer_escaping_in_paths) {
  const char* s = R"({"additionalProperties": {"type": "integer"}})";
  EXPECT_EQ(paths(check(s, R"({"a/b": "x", "c~d": "y"})")),
            (std::vector<std::string>{"/a~1b", "/c~0d"}));
  // Escaped tokens in $ref resolve too.
  EXPECT_FALSE(valid(R"({"$defs": {"a/b": {"type": "string"}}, "$ref": "#/$defs/a~1b"})", "1"));
}

TEST(json_schema, malformed_schema_reports_instead_of_crashing) {
  const auto missing = check(R"({"properties": {"x": {"$ref": "#/$defs/nope"}}})", R"({"x": 1})");
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0].path, "/x");
  EXPECT_TRUE(mentions(missing, "unresolvable $ref #/$defs/nope"));
  EXPECT_TRUE(mentions(check(R"({"$ref": "other.json#/a"})", "1"), "only local $ref"));
  EXPECT_TRUE(mentions(check(R"({"type": "float"})", "1"), "unknown type"));
  EXPECT_TRUE(mentions(check(R"({"pattern": "("})", R"("a")"), "not a valid ECMAScript regex"));
  EXPECT_TRUE(mentions(check(R"({"minimum": "zero"})", "1"), "invalid schema"));
  EXPECT_TRUE(mentions(check(R"({"required": "a"})", "{}"), "invalid schema"));
  EXPECT_TRUE(mentions(check("5", "1"), "invalid schema"));
  // A self-referencing definition never consumes the document; it must stop, not overflow.
  EXPECT_TRUE(mentions(
      check(R"({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})", "1"), "$ref cycle"));
  // A broken branch cannot hide behind anyOf even when another branch passes.
  EXPECT_TRUE(mentions(check(R"({"anyOf": [{}, {"$ref": "#/nope"}]})", "1"), "unresolvable"));
}

TEST(json_schema, reports_all_errors) {
  const char* s = R"({"type": "object", "required": ["a", "b", "c"],
                      "properties": {"d": {"type": "string"}, "e": {"minimum": 3}}})";
  EXPECT_EQ(check(s, R"({"d": 1, "e": 1})").size(), 5u);
}
