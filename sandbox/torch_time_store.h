// The LibTorch reference's GPU times, kept beside the compile cache: KernelBench measures its
// torch baseline once per GPU and reuses it, and so does `kernelgate eval` (--torch-time cached).
// An entry is keyed by what its time depends on -- the task file's bytes, the GPU's name and the
// LibTorch version -- and carries when and under which clocks it was measured.
#pragma once

#include <filesystem>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

namespace kg {

class torch_time_store {
public:
  // Reads `file` if it exists; an unreadable or malformed file is an empty store (it is only a
  // cache), and `why` says so.
  explicit torch_time_store(std::filesystem::path file, std::string* why = nullptr);

  static std::string key(const std::string& task_sha256, const std::string& gpu_name,
                         const std::string& torch_version);
  // The entry for `key`, or null.
  nlohmann::json find(const std::string& key) const;
  void put(const std::string& key, const nlohmann::json& entry);
  // Writes the whole store (a temporary file, then a rename). False and `why` on failure.
  bool save(std::string* why) const;

private:
  std::filesystem::path file_;
  mutable std::mutex m_;
  nlohmann::json entries_ = nlohmann::json::object();
  bool dirty_ = false;
};

} // namespace kg
