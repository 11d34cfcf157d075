// Where candidates' tensors go: memory-backed /dev/shm only when it has room, else the output
// folder (a container's 64 MB /dev/shm would fill and cut outputs short).
#include <filesystem>
#include <string>

#include <unistd.h>

#include <gtest/gtest.h>

#include "suite/worker_paths.h"

namespace fs = std::filesystem;

TEST(worker_paths, memory_scratch_needs_room_in_dev_shm) {
  const fs::path out = "/nonexistent-out";
  const auto pid = std::to_string(::getpid());
  // More room than any machine has: the output folder.
  EXPECT_EQ(kg::memory_scratch(out, "kg-test", std::uintmax_t{1} << 62), out / "work");
  std::error_code ec;
  const bool shm = fs::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0;
  if (!shm) GTEST_SKIP() << "no writable /dev/shm here";
  // No room asked for: /dev/shm, named after the process.
  EXPECT_EQ(kg::memory_scratch(out, "kg-test", 0), fs::path("/dev/shm") / ("kg-test-" + pid));
}
