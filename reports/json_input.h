// The one way kernelgate reads a JSON input (task files, results, KernelBench files, manifests):
// every failure -- a folder or missing file, an I/O error, malformed JSON, a number outside the
// double range, nesting or size past the limits -- becomes a json_input_error whose message is one
// line naming the file. The limits keep every later walk of the document (schema validation,
// error messages that print a value) shallow enough for any stack.
#pragma once

#include "base/printable.h" // printable(), which this header used to declare

#include <cstddef>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kg {

struct json_input_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct json_limits {
  std::size_t max_bytes = std::size_t{1} << 31; // 2 GiB
  int max_depth = 256;                          // nested arrays and objects
};

// Parses `text`; `name` is what messages call it (a path, "standard input").
nlohmann::json parse_json_text(std::string_view text, const std::string& name,
                               const json_limits& limits = {});
// Reads and parses a file; `bytes`, when given, receives the file's bytes (for hashing).
nlohmann::json read_json_file_checked(const std::filesystem::path& path,
                                      const json_limits& limits = {}, std::string* bytes = nullptr);

} // namespace kg
