// Where the commands that run candidates (eval, audit checker --protocol) find the worker and
// put the trials' tensors.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace kg {

// $KERNELGATE_WORKER when set (the CPU tests' stand-in; taken as it is), else
// worker_binary_beside(this executable).
std::filesystem::path worker_binary();

// The slim worker `kg_worker` in `self`'s folder when it is there and executable (no LibTorch or
// cuBLAS to load at every worker start: sandbox/worker_main.cpp), else `self` (run as `self
// worker`). Both take the same arguments.
std::filesystem::path worker_binary_beside(const std::filesystem::path& self);

// /dev/shm/<prefix>-<pid> when /dev/shm is writable and has `min_free_bytes` free (tens of MB per
// trial never touch a disk; a container's default /dev/shm of 64 MB would fill and cut outputs
// short), else <out>/work.
std::filesystem::path memory_scratch(const std::filesystem::path& out, const std::string& prefix,
                                     std::uintmax_t min_free_bytes = std::uintmax_t{8} << 30);

} // namespace kg
