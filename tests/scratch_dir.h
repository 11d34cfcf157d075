// Test helpers for files: a scratch folder under the build tree (tests never write to /tmp), and
// a file's bytes.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

#include "reports/remove_tree.h"

namespace kg::test {

// The test program's scratch folder, KG_TEST_SCRATCH_DIR/<prefix>-<pid>: made on first use,
// removed with everything in it when the program ends. One per program (the first prefix names
// it); the pid keeps programs that ctest runs in parallel apart.
inline std::filesystem::path scratch_dir(const std::string& prefix) {
  static const struct root {
    std::filesystem::path p;
    explicit root(const std::string& name)
        : p(std::filesystem::path(KG_TEST_SCRATCH_DIR) /
            (name + "-" + std::to_string(::getpid()))) {
      std::filesystem::create_directories(p);
    }
    ~root() { remove_tree(p); }
  } r(prefix);
  return r.p;
}

inline std::string slurp(const std::filesystem::path& f) {
  std::ifstream in(f, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

} // namespace kg::test
