#include "suite/worker_paths.h"

#include <cstdlib>

#include <unistd.h>

namespace kg {

namespace fs = std::filesystem;

fs::path worker_binary() {
  if (const char* e = std::getenv("KERNELGATE_WORKER"); e && *e) return e;
  return worker_binary_beside(fs::read_symlink("/proc/self/exe"));
}

fs::path worker_binary_beside(const fs::path& self) {
  const fs::path slim = self.parent_path() / "kg_worker";
  std::error_code ec;
  if (fs::is_regular_file(slim, ec) && ::access(slim.c_str(), X_OK) == 0) return slim;
  return self;
}

fs::path memory_scratch(const fs::path& out, const std::string& prefix,
                        std::uintmax_t min_free_bytes) {
  const fs::path shm = "/dev/shm";
  std::error_code ec;
  if (fs::is_directory(shm, ec) && ::access(shm.c_str(), W_OK) == 0 &&
      fs::space(shm, ec).available >= min_free_bytes && !ec)
    return shm / (prefix + "-" + std::to_string(::getpid()));
  return out / "work";
}

} // namespace kg
