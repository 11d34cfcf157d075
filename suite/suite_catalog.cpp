#include "suite/suite_catalog.h"

#include <cstdlib>

#include "reports/json_schema.h"

namespace kg {

std::filesystem::path default_suites_dir() {
  if (const char* dir = std::getenv("KERNELGATE_SUITES_DIR"); dir && *dir) return dir;
  return KG_SUITES_DIR;
}

std::vector<std::string> validate_suite_document(const nlohmann::json& doc) {
  static const nlohmann::json schema = nlohmann::json::parse(suite_schema_text());
  std::vector<std::string> out;
  for (const auto& e : validate_json(schema, doc))
    out.push_back((e.path.empty() ? "/" : e.path) + ": " + e.message);
  return out;
}

suite_def load_suite_validated(const std::string& name_or_file,
                               const std::filesystem::path& suites_dir) {
  return load_suite(name_or_file, suites_dir, validate_suite_document);
}

} // namespace kg
