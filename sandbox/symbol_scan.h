// What a candidate's shared object imports, and which imports a task forbids. Candidates link the
// CUDA runtime as a shared library (--cudart=shared), so every runtime call they make is an
// imported symbol: recording events or synchronizing (touching the timer), creating threads,
// loading libraries at run time, and calling cuBLAS / cuDNN / LibTorch are visible without
// running anything.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace kg {

// Undefined dynamic symbols of a shared object (via `nm -D --undefined-only`); nullopt when nm
// cannot read it.
std::optional<std::vector<std::string>> imported_symbols(const std::filesystem::path& so);

struct forbidden_import {
  std::string symbol;
  std::string why; // "touches the timer", "creates threads", "calls a library the task forbids"
};

std::vector<forbidden_import> forbidden_imports(const std::vector<std::string>& imports,
                                                bool library_calls_allowed);

} // namespace kg
