#include "sandbox/candidate_compiler.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "base/sha256.h"
#include "sandbox/process.h"
#include "timing/phase_log.h"

namespace kg {
namespace {

std::string nvcc_path(const compile_options& opt) {
  return opt.nvcc.empty() ? std::string(KG_NVCC) : opt.nvcc;
}

// `nvcc --version`, once per compiler: part of every cache key.
std::string compiler_version(const std::string& nvcc) {
  static std::mutex m;
  static std::map<std::string, std::string> seen;
  std::lock_guard<std::mutex> lock(m);
  if (auto it = seen.find(nvcc); it != seen.end()) return it->second;
  const auto log = std::filesystem::temp_directory_path() /
                   ("kg-nvcc-version-" + std::to_string(::getpid()) + ".txt");
  std::filesystem::remove(log);
  const auto r = run_process({nvcc, "--version"}, log, {.timeout_seconds = 60});
  std::string v = r.exited && r.exit_code == 0 ? file_tail(log, 4096) : "unknown";
  std::filesystem::remove(log);
  return seen[nvcc] = v;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

} // namespace

std::vector<std::string> candidate_nvcc_flags() {
  // --cudart=shared: every runtime call the candidate makes is an imported symbol that
  // symbol_scan can read; the rpath finds the toolkit's runtime without LD_LIBRARY_PATH.
  return {"-O3",
          "-std=c++17",
          "-shared",
          "-Xcompiler",
          "-fPIC",
          "-lineinfo",
          "-gencode=arch=compute_90a,code=sm_90a",
          "--cudart=shared",
          "-Xlinker",
          "-rpath=" KG_CUDA_LIBDIR,
          "-I" KG_ABI_DIR};
}

std::filesystem::path default_cache_dir() {
  if (const char* e = std::getenv("KERNELGATE_CACHE"); e && *e) return e;
  if (const char* h = std::getenv("HOME"); h && *h)
    return std::filesystem::path(h) / ".cache" / "kernelgate";
  return std::filesystem::temp_directory_path() / "kernelgate-cache";
}

compile_result compile_candidate(const std::filesystem::path& cu, const compile_options& opt) {
  namespace fs = std::filesystem;
  compile_result r;
  r.source = cu;
  std::ifstream probe(cu);
  if (!probe) {
    r.log = "cannot read " + cu.string();
    return r;
  }
  const std::string nvcc = nvcc_path(opt);
  const auto flags = candidate_nvcc_flags();
  sha256 h;
  const std::string src = read_file(cu), version = compiler_version(nvcc);
  h.update(src.data(), src.size());
  for (const auto& f : flags) {
    h.update("\0", 1);
    h.update(f.data(), f.size());
  }
  h.update(version.data(), version.size());
  r.key = h.finish_hex();
  const fs::path dir = (opt.cache_dir.empty() ? default_cache_dir() : opt.cache_dir) / r.key;
  r.shared_object = dir / "candidate.so";
  r.command = {nvcc};
  r.command.insert(r.command.end(), flags.begin(), flags.end());
  // The source is copied next to its binary, so a cached entry says what it was built from.
  r.command.insert(r.command.end(),
                   {"-o", r.shared_object.string(), (dir / "candidate.cu").string()});
  std::error_code ec;
  if (fs::exists(dir / "ok", ec)) {
    r.ok = r.cached = true;
    r.log = file_tail(dir / "compile.log");
    std::ifstream ok(dir / "ok");
    std::string key;
    if (!(ok >> key >> r.nvcc_seconds) || r.nvcc_seconds < 0) r.nvcc_seconds = 0;
    return r;
  }
  fs::create_directories(dir, ec);
  if (ec) {
    r.log = "cannot create cache folder " + dir.string() + ": " + ec.message();
    return r;
  }
  {
    std::ofstream out(dir / "candidate.cu", std::ios::binary);
    out << src;
  }
  fs::remove(dir / "compile.log", ec);
  std::optional<scoped_phase> phase(std::in_place, "compile.nvcc");
  const auto p =
      run_process(r.command, dir / "compile.log", {.timeout_seconds = opt.timeout_seconds});
  phase.reset();
  r.seconds = r.nvcc_seconds = p.seconds;
  r.log = file_tail(dir / "compile.log");
  r.ok = p.exited && p.exit_code == 0 && fs::exists(r.shared_object, ec);
  if (r.ok) {
    // Written last: a killed compile is never a hit. The key, then what the compile took.
    std::ofstream(dir / "ok") << r.key << "\n" << p.seconds << "\n";
  } else if (!p.exited || p.exit_code != 0) {
    r.log = "nvcc " + p.describe() + "\n" + r.log;
  }
  return r;
}

std::vector<compile_result> compile_candidates(const std::vector<std::filesystem::path>& sources,
                                               const compile_options& opt) {
  std::vector<compile_result> out(sources.size());
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t jobs =
      std::min<std::size_t>(sources.size(), opt.jobs > 0 ? static_cast<unsigned>(opt.jobs) : cores);
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> pool;
  for (std::size_t k = 0; k < jobs; ++k)
    pool.emplace_back([&] {
      for (std::size_t i; (i = next++) < sources.size();)
        out[i] = compile_candidate(sources[i], opt);
    });
  for (auto& t : pool)
    t.join();
  return out;
}

} // namespace kg
