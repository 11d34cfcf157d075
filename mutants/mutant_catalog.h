// The mutant catalog: every mutation site of a CUDA source (mutants/mutation_rules.h) as a mutant
// with a stable id, and the mutated source of one mutant. A mutant's id is the first 16 hex digits
// of SHA-256 over rule, '\0', path, '\0', "line:column", '\0', original, '\0', replacement: the
// same file and rules give the same ids on any machine and in any run.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kg {

struct mutant {
  std::string id; // 16 hex digits (above)
  std::string family, rule;
  std::string path; // the source relative to the catalog's root, forward slashes
  std::string task; // kernels/tasks/relu.cu -> relu; kernels/variants/X/... -> X
  int line = 0, column = 0;
  std::size_t offset = 0, length = 0;
  std::string original, replacement;
  bool operator==(const mutant&) const = default;
};

// The id of a mutant from its parts (above).
std::string mutant_id(std::string_view rule, std::string_view path, int line, int column,
                      std::string_view original, std::string_view replacement);

// Every mutant of one source, ordered by offset, then rule. Throws std::logic_error if two of them
// share an id (two rules or sites that collide: a bug of the rules).
std::vector<mutant> generate_mutants(std::string_view source, const std::string& path,
                                     const std::string& task);

// `source` with the mutant applied. Throws std::invalid_argument when the bytes at
// [offset, offset + length) are not the mutant's original text (another file, or an edited one).
std::string apply_mutant(std::string_view source, const mutant& m);

// The seven families, in a fixed order: arithmetic, precision, indexing, boundary,
// synchronization, structural, parameter_use.
std::vector<std::string> mutant_families();

nlohmann::json to_json(const mutant& m);
// Throws std::invalid_argument naming the field when a member is missing or of the wrong type.
mutant mutant_from_json(const nlohmann::json& j);

} // namespace kg
