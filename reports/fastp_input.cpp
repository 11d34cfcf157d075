#include "reports/fastp_input.h"

#include <fstream>
#include <iterator>
#include <system_error>

#include "reports/json_input.h"
#include "base/sha256.h"

namespace kg {

json_file read_json_file(const std::filesystem::path& path) {
  json_file out;
  out.path = path;
  try {
    out.doc = read_json_file_checked(path, {}, &out.bytes);
  } catch (const json_input_error& e) {
    throw fastp_input_error(e.what());
  }
  return out;
}

nlohmann::json file_identity(const json_file& f) {
  return {{"path", f.path.string()}, {"sha256", sha256_hex(std::string_view(f.bytes))}};
}

} // namespace kg
