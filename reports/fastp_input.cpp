#include "reports/fastp_input.h"

#include <fstream>
#include <iterator>
#include <system_error>

#include "reports/sha256.h"

namespace kg {

json_file read_json_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw fastp_input_error("'" + path.string() + "' is a folder, not a JSON file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw fastp_input_error("cannot read '" + path.string() + "'");
  json_file out;
  out.path = path;
  out.bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  if (f.bad()) throw fastp_input_error("cannot read '" + path.string() + "'");
  try {
    out.doc = nlohmann::json::parse(out.bytes);
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann's message already says where ("at line 3, column 7"); keep it on one line.
    std::string what = e.what();
    for (char& c : what)
      if (c == '\n') c = ' ';
    throw fastp_input_error("malformed JSON in '" + path.string() + "': " + what);
  }
  return out;
}

nlohmann::json file_identity(const json_file& f) {
  return {{"path", f.path.string()}, {"sha256", sha256_hex(std::string_view(f.bytes))}};
}

} // namespace kg
