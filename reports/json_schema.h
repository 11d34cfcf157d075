// A JSON Schema (draft 2020-12) validator for the subset that the result-file schema uses, so
// `kernelgate validate` needs no external validator. Supported keywords: type, enum, const,
// properties, patternProperties, required, additionalProperties, items, prefixItems, minItems,
// maxItems, minimum, maximum, exclusiveMinimum, exclusiveMaximum, minLength, maxLength, pattern,
// allOf, anyOf, oneOf, not, if/then/else, and local $ref ("#", "#/$defs/...", any "#/pointer").
// Annotations ($schema, $comment, title, description, default, examples, format, deprecated,
// readOnly, writeOnly, content*), containers ($defs, definitions) and a root $id are ignored. A
// schema that uses any other keyword anywhere is refused ("invalid schema: keyword ... is not
// implemented") rather than half-checked. Tested against the official JSON-Schema-Test-Suite
// (tests/test_json_schema_suite.cpp).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kg {

struct schema_error {
  std::string path;    // JSON pointer into the document, e.g. "/records/3/verdict"; "" is the root
  std::string message; // starts with "invalid schema:" when the schema itself is at fault
};

// Returns every violation found (empty means valid). Never throws on a malformed schema; the
// fault is reported as an error at the document location where it was hit.
std::vector<schema_error> validate_json(const nlohmann::json& schema,
                                        const nlohmann::json& document);

// The keywords validate_json implements (the rest of a schema may only be annotations).
std::span<const std::string_view> implemented_schema_keywords();

} // namespace kg
