// The kernel roles' built-in implementations and the SHA-256 of their code: per implementation,
// the SHA-256 of the concatenated per-file SHA-256s of its sources (kernels/decode/..., in the
// order suite/CMakeLists.txt lists them), computed when CMake configures; CMake re-configures
// when one of those files changes, so the hash is the code compiled in.
#pragma once

#include <map>
#include <string>

namespace kg {
const std::map<std::string, std::string>& role_source_sha256();
} // namespace kg
