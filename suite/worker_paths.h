// Where the commands that run candidates (eval, audit checker --protocol) find the worker and
// put the trials' tensors.
#pragma once

#include <filesystem>
#include <string>

namespace kg {

// $KERNELGATE_WORKER when set (the CPU tests' stand-in), else this executable.
std::filesystem::path worker_binary();

// /dev/shm/<prefix>-<pid> when /dev/shm is writable (tens of MB per trial never touch a disk),
// else <out>/work.
std::filesystem::path memory_scratch(const std::filesystem::path& out, const std::string& prefix);

} // namespace kg
