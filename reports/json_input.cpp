#include "reports/json_input.h"

#include <cstdio>
#include <fstream>
#include <iterator>
#include <system_error>

namespace kg {
namespace {

// The deepest nesting of arrays and objects in `text`, outside strings; stops counting past
// `limit` (one pass, no recursion, whatever the input).
int nesting_depth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

std::string flat(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

} // namespace

nlohmann::json parse_json_text(std::string_view text, const std::string& name,
                               const json_limits& limits) {
  const std::string where = "'" + printable(name) + "'";
  if (text.size() > limits.max_bytes)
    throw json_input_error(where + " is " + std::to_string(text.size()) + " bytes, more than the " +
                           std::to_string(limits.max_bytes) + " a JSON input may have");
  if (const int d = nesting_depth(text, limits.max_depth); d > limits.max_depth)
    throw json_input_error(where + " nests arrays and objects more than " +
                           std::to_string(limits.max_depth) + " deep");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann's message already says where ("at line 3, column 7").
    throw json_input_error("malformed JSON in " + where + ": " + flat(e.what()));
  } catch (const nlohmann::json::exception& e) { // out_of_range: a number past the double range
    throw json_input_error("unusable JSON in " + where + ": " + flat(e.what()));
  }
}

nlohmann::json read_json_file_checked(const std::filesystem::path& path, const json_limits& limits,
                                      std::string* bytes) {
  const std::string where = "'" + printable(path.string()) + "'";
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status))
    throw json_input_error("cannot read " + where + ": no such file");
  if (std::filesystem::is_directory(status))
    throw json_input_error(where + " is a folder, not a JSON file");
  if (!std::filesystem::is_regular_file(status))
    throw json_input_error(where + " is not a regular file");
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > limits.max_bytes)
    throw json_input_error(where + " is " + std::to_string(size) + " bytes, more than the " +
                           std::to_string(limits.max_bytes) + " a JSON input may have");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw json_input_error("cannot read " + where);
  std::string text{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  if (f.bad()) throw json_input_error("cannot read " + where + ": I/O error");
  auto doc = parse_json_text(text, path.string(), limits);
  if (bytes) *bytes = std::move(text);
  return doc;
}

} // namespace kg
