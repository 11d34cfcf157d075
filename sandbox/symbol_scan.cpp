#include "sandbox/symbol_scan.h"

#include <cstdio>
#include <memory>
#include <sstream>

#include "sandbox/process.h"

namespace kg {

std::optional<std::vector<std::string>> imported_symbols(const std::filesystem::path& so) {
  const auto log = std::filesystem::path(so).replace_extension(".imports.txt");
  std::error_code ec;
  std::filesystem::remove(log, ec);
  const auto r =
      run_process({"nm", "-D", "--undefined-only", so.string()}, log, {.timeout_seconds = 60});
  if (!r.exited || r.exit_code != 0) return std::nullopt;
  std::vector<std::string> out;
  std::istringstream in(file_tail(log, 1u << 24));
  for (std::string line; std::getline(in, line);) {
    // "                 U cudaLaunchKernel@libcudart.so.13"
    std::istringstream f(line);
    std::string kind, name;
    if (f >> kind >> name && (kind == "U" || kind == "w"))
      out.push_back(name.substr(0, name.find('@')));
  }
  return out;
}

std::vector<forbidden_import> forbidden_imports(const std::vector<std::string>& imports,
                                                bool library_calls_allowed) {
  struct rule {
    const char* prefix;
    const char* why;
    bool library; // forbidden only where the task forbids library calls
  };
  static const rule rules[] = {
      {"cudaEvent", "touches the timer (CUDA events)", false},
      {"cuEvent", "touches the timer (CUDA events)", false},
      {"cudaDeviceSynchronize", "synchronizes inside the timed call", false},
      {"cudaStreamSynchronize", "synchronizes inside the timed call", false},
      {"cuCtxSynchronize", "synchronizes inside the timed call", false},
      {"cudaProfiler", "touches the profiler", false},
      {"cupti", "touches the profiler", false},
      {"nvml", "touches clocks or the device state (NVML)", false},
      {"pthread_create", "creates threads", false},
      {"_ZNSt6thread", "creates threads (std::thread)", false},
      {"_ZNSt7jthread", "creates threads (std::jthread)", false},
      {"clone", "creates threads or processes", false},
      {"syscall", "makes raw system calls (threads, processes)", false},
      {"fork", "creates processes", false},
      {"system", "creates processes", false},
      {"dlopen", "loads libraries at run time (hides what it calls)", false},
      {"dlsym", "looks up symbols at run time (hides what it calls)", false},
      {"cudaGetDriverEntryPoint", "looks up driver functions at run time", false},
      {"cublas", "calls cuBLAS", true},
      {"cudnn", "calls cuDNN", true},
      {"_ZN2at", "calls LibTorch (ATen)", true},
      {"_ZN3c10", "calls LibTorch (c10)", true},
      {"_ZN5torch", "calls LibTorch", true},
  };
  std::vector<forbidden_import> out;
  for (const auto& s : imports)
    for (const auto& r : rules)
      if (s.rfind(r.prefix, 0) == 0 && (!r.library || !library_calls_allowed)) {
        out.push_back({s, r.why});
        break;
      }
  return out;
}

} // namespace kg
