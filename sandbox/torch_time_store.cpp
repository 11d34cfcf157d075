#include "sandbox/torch_time_store.h"

#include <fstream>

#include <unistd.h>

namespace kg {

namespace fs = std::filesystem;

torch_time_store::torch_time_store(fs::path file, std::string* why) : file_(std::move(file)) {
  std::ifstream in(file_);
  if (!in) return;
  const auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_object() && j.value("format", "") == "kernelgate.torch_times/1" &&
      j.contains("entries") && j["entries"].is_object())
    entries_ = j["entries"];
  else if (why)
    *why = file_.string() + " is not a kernelgate.torch_times/1 file; starting afresh";
}

std::string torch_time_store::key(const std::string& task_sha256, const std::string& gpu_name,
                                  const std::string& torch_version) {
  return task_sha256 + "|" + gpu_name + "|torch " + torch_version;
}

nlohmann::json torch_time_store::find(const std::string& key) const {
  std::lock_guard<std::mutex> l(m_);
  const auto it = entries_.find(key);
  return it == entries_.end() ? nlohmann::json() : *it;
}

void torch_time_store::put(const std::string& key, const nlohmann::json& entry) {
  std::lock_guard<std::mutex> l(m_);
  entries_[key] = entry;
  dirty_ = true;
}

bool torch_time_store::save(std::string* why) const {
  std::lock_guard<std::mutex> l(m_);
  if (!dirty_) return true;
  std::error_code ec;
  fs::create_directories(file_.parent_path(), ec);
  // A private temporary name: two evals sharing a cache must not write into one file.
  const fs::path tmp = file_.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    out << nlohmann::json{{"format", "kernelgate.torch_times/1"}, {"entries", entries_}}.dump(1)
        << "\n";
    if (!out) {
      if (why) *why = "cannot write " + tmp.string();
      return false;
    }
  }
  fs::rename(tmp, file_, ec);
  if (ec && why) *why = "cannot rename " + tmp.string() + ": " + ec.message();
  return !ec;
}

} // namespace kg
