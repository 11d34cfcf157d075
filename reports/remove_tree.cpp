#include "reports/remove_tree.h"

#include <cerrno>
#include <cstdio>
#include <ftw.h>
#include <sys/stat.h>

namespace kg {

namespace {
int remove_entry(const char* p, const struct stat*, int, struct FTW*) {
  return std::remove(p);
}
} // namespace

bool remove_tree(const std::filesystem::path& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return errno == ENOENT;
  // FTW_DEPTH: children before their folder; FTW_PHYS: never follow symbolic links.
  return nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0;
}

} // namespace kg
