// Recursive removal without std::filesystem::remove_all. The LibTorch shipped with PyTorch 2.11
// exports its own copy of std::filesystem::remove_all, which interposes on libstdc++'s in any
// binary linking it and jumps to a null pointer (seen on the H200 machine). nftw has no C++ ABI.
#pragma once

#include <filesystem>

namespace kg {
// Removes `path` and everything below it; a missing path is not an error. Returns false if
// anything could not be removed.
bool remove_tree(const std::filesystem::path& path);
} // namespace kg
