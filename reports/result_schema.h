// The result JSON Schema (data/schema/result.schema.json), embedded at build time so `kernelgate
// validate` works from any folder.
#pragma once

#include <string_view>

namespace kg {
std::string_view result_schema_text();
}
