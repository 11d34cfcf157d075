#include "timing/phase_log.h"

#include <cstdio>
#include <cstdlib>

#include <fcntl.h>
#include <unistd.h>

namespace kg {
namespace {

int log_fd() {
  static const int fd = [] {
    const char* f = std::getenv("KG_PHASE_LOG");
    return f && *f ? ::open(f, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;
  }();
  return fd;
}

} // namespace

scoped_phase::scoped_phase(const char* name) : name_(name), on_(log_fd() >= 0) {
  if (on_) t0_ = std::chrono::steady_clock::now();
}

scoped_phase::~scoped_phase() {
  if (!on_) return;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  char line[160];
  const int n =
      std::snprintf(line, sizeof line, "%d %s %.6f\n", static_cast<int>(::getpid()), name_, s);
  if (n > 0) (void)!::write(log_fd(), line, static_cast<std::size_t>(n));
}

} // namespace kg
