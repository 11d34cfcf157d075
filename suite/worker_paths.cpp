#include "suite/worker_paths.h"

#include <cstdlib>

#include <unistd.h>

namespace kg {

namespace fs = std::filesystem;

fs::path worker_binary() {
  if (const char* e = std::getenv("KERNELGATE_WORKER"); e && *e) return e;
  return fs::read_symlink("/proc/self/exe");
}

fs::path memory_scratch(const fs::path& out, const std::string& prefix) {
  const fs::path shm = "/dev/shm";
  if (fs::is_directory(shm) && ::access(shm.c_str(), W_OK) == 0)
    return shm / (prefix + "-" + std::to_string(::getpid()));
  return out / "work";
}

} // namespace kg
