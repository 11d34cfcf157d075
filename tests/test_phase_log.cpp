// The phase log (timing/phase_log.h): every phase that ends is one line "<pid> <name> <seconds>"
// appended to KG_PHASE_LOG. Each ctest case runs in its own process, so the variable set here is
// the one the log opens on first use.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <unistd.h>

#include "timing/phase_log.h"

TEST(phase_log, each_phase_appends_its_pid_name_and_seconds) {
  const auto f = std::filesystem::temp_directory_path() /
                 ("kg-test-phase-log-" + std::to_string(::getpid()) + ".log");
  std::filesystem::remove(f);
  ::setenv("KG_PHASE_LOG", f.c_str(), 1);
  {
    kg::scoped_phase a("outer");
    {
      kg::scoped_phase b("inner");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  std::ifstream in(f);
  long pid = 0;
  std::string name;
  double seconds = 0;
  // Inner ends first; the outer phase spans it.
  ASSERT_TRUE(in >> pid >> name >> seconds);
  EXPECT_EQ(pid, ::getpid());
  EXPECT_EQ(name, "inner");
  EXPECT_GE(seconds, 0.019);
  const double inner = seconds;
  ASSERT_TRUE(in >> pid >> name >> seconds);
  EXPECT_EQ(name, "outer");
  EXPECT_GE(seconds, inner);
  EXPECT_FALSE(in >> pid); // two phases, two lines
  ::unsetenv("KG_PHASE_LOG");
  std::filesystem::remove(f);
}
