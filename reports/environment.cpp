#include "reports/environment.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <sys/utsname.h>
#include <thread>
#include <unistd.h>

#if __has_include(<torch/version.h>)
#include <torch/version.h> // macros only: the LibTorch this binary was built against
#endif

#include "generated/git_revision.h"
#include "gpu/device_info.h"
#include "gpu/nvml.h"

// Build facts the build system passes in; a build that does not is still a valid build.
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

using nlohmann::json;

const char* const unavailable = "unavailable";

template <typename T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(unavailable);
}

// An empty macro (CMAKE_BUILD_TYPE unset, say) carries no information either.
json text(const std::string& s) {
  return s.empty() ? json(unavailable) : json(s);
}

std::string trim(std::string s) {
  const char* ws = " \t\r\n";
  s.erase(0, s.find_first_not_of(ws));
  s.erase(s.find_last_not_of(ws) + 1);
  return s;
}

// The value of the first "key <sep> value" line of a text file such as /proc/cpuinfo or
// os-release; quotes around the value are dropped.
std::optional<std::string> read_key(const char* path, const std::string& key, char sep) {
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) {
    const auto pos = line.find(sep);
    if (pos == std::string::npos || trim(line.substr(0, pos)) != key) continue;
    std::string v = trim(line.substr(pos + 1));
    if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front())
      v = v.substr(1, v.size() - 2);
    if (v.empty()) return std::nullopt;
    return v;
  }
  return std::nullopt;
}

std::string compiler() {
#if defined(__clang__)
  return "clang " __clang_version__;
#elif defined(__GNUC__)
  return "gcc " __VERSION__;
#else
  return unavailable;
#endif
}

std::string libtorch_version() {
#ifdef TORCH_VERSION
  return TORCH_VERSION;
#else
  return unavailable;
#endif
}

json git_dirty(const std::string& s) {
  if (s == "true") return true;
  if (s == "false") return false;
  return unavailable; // not a git checkout, or git missing at build time
}

json gpu_section(const device_info& dev) {
  const json count = opt(dev.device_count);
  if (!dev.available)
    return {{"available", false},          {"reason", text(dev.reason)},
            {"device_count", count},       {"name", unavailable},
            {"sm_count", unavailable},     {"l2_bytes", unavailable},
            {"memory_bytes", unavailable}, {"compute_capability", unavailable}};
  return {
      {"available", true},
      {"device_count", count},
      {"name", text(dev.name)},
      {"sm_count", dev.sm_count},
      {"l2_bytes", dev.l2_bytes},
      {"memory_bytes", dev.memory_bytes},
      {"compute_capability", std::to_string(dev.cc_major) + "." + std::to_string(dev.cc_minor)}};
}

json clocks_section(const nvml_clocks& c) {
  return {{"sm_current_mhz", opt(c.sm_current)},
          {"sm_application_mhz", opt(c.sm_application)},
          {"sm_default_application_mhz", opt(c.sm_default_application)},
          {"sm_max_mhz", opt(c.sm_max)},
          {"mem_current_mhz", opt(c.mem_current)},
          {"mem_application_mhz", opt(c.mem_application)},
          {"mem_default_application_mhz", opt(c.mem_default_application)},
          {"mem_max_mhz", opt(c.mem_max)},
          {"locked", opt(c.clocks_locked)},
          {"locked_basis", text(c.locked_basis)},
          {"throttle_mask", opt(c.throttle_mask)},
          // An empty list means "read, nothing throttling"; "unavailable" means "not read".
          {"throttle_reasons", c.throttle_mask ? json(c.throttle_reasons) : json(unavailable)}};
}

json os_section() {
  std::optional<std::string> pretty = read_key("/etc/os-release", "PRETTY_NAME", '=');
  if (!pretty) pretty = read_key("/usr/lib/os-release", "PRETTY_NAME", '=');
  utsname u{};
  const bool have_uname = uname(&u) == 0;
  char host[256] = {};
  const bool have_host = gethostname(host, sizeof host - 1) == 0 && host[0] != '\0';
  return {{"pretty_name", opt(pretty)},
          {"kernel", have_uname ? text(u.release) : json(unavailable)},
          {"hostname", have_host ? json(host) : json(unavailable)}};
}

json cpu_section() {
  const unsigned cores = std::thread::hardware_concurrency(); // 0: not computable
  return {{"model", opt(read_key("/proc/cpuinfo", "model name", ':'))},
          {"logical_cores", cores ? json(cores) : json(unavailable)}};
}

} // namespace

nlohmann::json collect_environment() {
  json env = json::object();
  const device_info dev = query_device(0);
  env["gpu"] = gpu_section(dev);
  env["cuda_runtime_version"] =
      dev.runtime_version ? cuda_version_string(*dev.runtime_version) : unavailable;

  const nvml_session nvml;
  env["nvml"] = {{"available", nvml.available()},
                 {"library", nvml.library()},
                 {"reason", nvml.why_unavailable()}};
  env["driver"] = {{"cuda_driver_version",
                    dev.driver_version ? cuda_version_string(*dev.driver_version) : unavailable},
                   {"nvml_driver_version", opt(nvml.driver_version())}};
  env["clocks"] = clocks_section(nvml.clocks(0));

  env["build"] = {{"compiler", compiler()},
                  {"cuda_compiler_version", text(KG_CUDA_COMPILER_VERSION)},
                  {"cuda_arch", text(KG_CUDA_ARCH)},
                  {"libtorch", libtorch_version()},
                  {"build_type", text(KG_BUILD_TYPE)}};
  env["git"] = {{"revision", text(KG_GIT_REVISION)}, {"dirty", git_dirty(KG_GIT_DIRTY)}};
  env["cpu"] = cpu_section();
  env["os"] = os_section();
  return env;
}

namespace {

std::string render(const std::string& key, const json& v) {
  if (v.is_string()) return v.get<std::string>().empty() ? "(none)" : v.get<std::string>();
  // Bit masks read best in hex; NVML's documentation lists the reasons that way.
  if (key == "throttle_mask" && v.is_number_integer() && v.get<long long>() >= 0) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", v.get<unsigned long long>());
    return buf;
  }
  if (v.is_array()) {
    if (v.empty()) return "none";
    std::string out;
    for (const auto& e : v)
      out += (out.empty() ? "" : ", ") + render("", e);
    return out;
  }
  return v.dump();
}

} // namespace

std::string format_environment(const nlohmann::json& env) {
  if (!env.is_object()) return env.dump() + "\n";
  // The order of `kernelgate env --json`'s documentation; any later addition follows.
  std::vector<std::string> order = {
      "gpu", "driver", "cuda_runtime_version", "clocks", "build", "git", "cpu", "os", "nvml"};
  for (const auto& [k, v] : env.items())
    if (std::find(order.begin(), order.end(), k) == order.end()) order.push_back(k);

  std::ostringstream o;
  for (const auto& section : order) {
    const auto it = env.find(section);
    if (it == env.end()) continue;
    if (!it->is_object()) {
      o << section << ": " << render(section, *it) << "\n";
      continue;
    }
    o << section << ":\n";
    std::size_t width = 0;
    for (const auto& [k, v] : it->items())
      width = std::max(width, k.size());
    for (const auto& [k, v] : it->items())
      o << "  " << k << ": " << std::string(width - k.size(), ' ') << render(k, v) << "\n";
  }
  return o.str();
}

} // namespace kg
