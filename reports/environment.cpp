#include "reports/environment.h"

#include <fstream>
#include <sstream>
#include <sys/utsname.h>
#include <thread>
#include <unistd.h>

#include <torch/version.h> // macros only: the LibTorch this binary was built against

#include "generated/git_revision.h"
#include "timing/device_info.h"
#include "timing/nvml.h"

#ifndef KG_CUDA_COMPILER_VERSION
#define KG_CUDA_COMPILER_VERSION "unknown"
#endif
#ifndef KG_CUDA_ARCH
#define KG_CUDA_ARCH "unknown"
#endif
#ifndef KG_BUILD_TYPE
#define KG_BUILD_TYPE "unknown"
#endif

namespace kg {
namespace {

const char* const unavailable = "unavailable";

template <typename T>
nlohmann::json opt(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(unavailable);
}

std::string read_key(const char* path, const std::string& key, char sep) {
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) {
    if (line.rfind(key, 0) != 0) continue;
    auto pos = line.find(sep, key.size());
    if (pos == std::string::npos) continue;
    std::string v = line.substr(pos + 1);
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t'))
      v.erase(v.begin());
    if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
    return v;
  }
  return unavailable;
}

std::string compiler() {
#if defined(__clang__)
  return "clang " __clang_version__;
#elif defined(__GNUC__)
  return "g++ " __VERSION__;
#else
  return unavailable;
#endif
}

} // namespace

nlohmann::json collect_environment() {
  nlohmann::json env;
  const device_info dev = query_device(0);
  if (dev.available) {
    env["gpu"] = {
        {"available", true},
        {"name", dev.name},
        {"sm_count", dev.sm_count},
        {"l2_bytes", dev.l2_bytes},
        {"memory_bytes", dev.memory_bytes},
        {"compute_capability", std::to_string(dev.cc_major) + "." + std::to_string(dev.cc_minor)},
        {"device_count", dev.device_count}};
  } else {
    env["gpu"] = {{"available", false},
                  {"reason", dev.reason},
                  {"name", unavailable},
                  {"sm_count", unavailable},
                  {"l2_bytes", unavailable},
                  {"memory_bytes", unavailable},
                  {"compute_capability", unavailable}};
  }
  const nvml_session nvml;
  env["nvml"] = {{"available", nvml.available()},
                 {"library", nvml.library()},
                 {"reason", nvml.available() ? "" : nvml.why_unavailable()}};
  env["driver"] = {{"cuda_driver_version", cuda_version_string(dev.driver_version)},
                   {"nvml_driver_version", opt(nvml.driver_version())}};
  env["cuda_runtime_version"] = cuda_version_string(dev.runtime_version);
  const nvml_clocks c = nvml.clocks(0);
  env["clocks"] = {{"sm_current_mhz", opt(c.sm_current)},
                   {"sm_application_mhz", opt(c.sm_application)},
                   {"sm_default_application_mhz", opt(c.sm_default_application)},
                   {"sm_max_mhz", opt(c.sm_max)},
                   {"mem_current_mhz", opt(c.mem_current)},
                   {"mem_application_mhz", opt(c.mem_application)},
                   {"mem_default_application_mhz", opt(c.mem_default_application)},
                   {"mem_max_mhz", opt(c.mem_max)},
                   {"locked", opt(c.locked)},
                   {"locked_basis", c.locked_basis.empty() ? unavailable : c.locked_basis},
                   {"throttle_mask", opt(c.throttle_mask)},
                   {"throttle_reasons", c.throttle_mask ? nlohmann::json(c.throttle_reasons)
                                                        : nlohmann::json(unavailable)}};
  env["build"] = {{"compiler", compiler()},
                  {"cuda_compiler_version", KG_CUDA_COMPILER_VERSION},
                  {"cuda_arch", KG_CUDA_ARCH},
                  {"libtorch", TORCH_VERSION},
                  {"build_type", KG_BUILD_TYPE}};
  env["git"] = {{"revision", KG_GIT_REVISION}, {"dirty", KG_GIT_DIRTY}};
  env["cpu"] = {{"model", read_key("/proc/cpuinfo", "model name", ':')},
                {"logical_cores", std::thread::hardware_concurrency()}};
  utsname u{};
  char host[256] = {};
  const bool have_uname = uname(&u) == 0;
  env["os"] = {{"pretty_name", read_key("/etc/os-release", "PRETTY_NAME", '=')},
               {"kernel", have_uname ? std::string(u.release) : unavailable},
               {"hostname", gethostname(host, sizeof host - 1) == 0 ? host : unavailable}};
  return env;
}

std::string format_environment(const nlohmann::json& env) {
  std::ostringstream o;
  auto text = [](const nlohmann::json& v) {
    return v.is_string() ? v.get<std::string>() : v.dump();
  };
  for (const auto& section : {"gpu", "driver", "clocks", "build", "git", "cpu", "os", "nvml"}) {
    o << section << ":\n";
    for (const auto& [k, v] : env[section].items())
      o << "  " << k << ": " << text(v) << "\n";
  }
  o << "cuda_runtime_version: " << text(env["cuda_runtime_version"]) << "\n";
  return o.str();
}

} // namespace kg
