#include "suite/local_shards.h"

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/printable.h"
#include "reports/remove_tree.h"
#include "sandbox/process.h"
#include "suite/exit_codes.h"
#include "suite/merge_command.h"

namespace kg {

namespace fs = std::filesystem;

std::vector<std::string> parse_gpu_list(const std::string& text) {
  std::vector<std::string> gpus;
  std::set<std::string> seen;
  std::istringstream parts(text);
  for (std::string g; std::getline(parts, g, ',');) {
    if (g.empty() || g.find_first_not_of("0123456789abcdefABCDEF-GPUMIG") != std::string::npos)
      throw std::invalid_argument("'" + text + "' is not a list of GPUs (e.g. 0,1,2,3)");
    if (!seen.insert(g).second) throw std::invalid_argument("GPU " + g + " is listed twice");
    gpus.push_back(g);
  }
  if (gpus.empty()) throw std::invalid_argument("--gpus is empty");
  return gpus;
}

namespace {

// The value of --NAME (as "--NAME V" or "--NAME=V"); the rest of args in `rest`.
std::optional<std::string> take_option(const std::vector<std::string>& args,
                                       const std::string& name, std::vector<std::string>& rest) {
  std::optional<std::string> v;
  std::vector<std::string> kept;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == name && i + 1 < args.size()) {
      v = args[++i];
    } else if (args[i].rfind(name + "=", 0) == 0) {
      v = args[i].substr(name.size() + 1);
    } else {
      kept.push_back(args[i]);
    }
  }
  rest = std::move(kept);
  return v;
}

} // namespace

int run_local_shards(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::vector<std::string> rest;
  const auto gpu_text = take_option(args, "--gpus", rest);
  const auto out_dir = take_option(rest, "--out", rest);
  std::vector<std::string> gpus;
  try {
    gpus = parse_gpu_list(gpu_text.value_or(""));
  } catch (const std::invalid_argument& e) {
    err << "kernelgate: --gpus: " << printable(e.what(), 300) << "\n";
    return exit_code::bad_input;
  }
  for (const auto& w : rest)
    if (w == "--shard" || w.rfind("--shard=", 0) == 0 || w == "--resume" ||
        w.rfind("--resume=", 0) == 0) {
      err << "kernelgate: --gpus runs its own shards: drop " << w << "\n";
      return exit_code::bad_input;
    }
  if (!out_dir || out_dir->empty()) {
    err << "kernelgate: --gpus needs --out DIR (the shards go to DIR/shards)\n";
    return exit_code::bad_input;
  }
  const fs::path base = *out_dir, shards = base / "shards";
  std::error_code ec;
  fs::create_directories(shards, ec);
  if (ec) {
    err << "kernelgate: cannot create " << shards.string() << ": " << ec.message() << "\n";
    return exit_code::bad_input;
  }
  std::error_code self_ec;
  const auto self = fs::read_symlink("/proc/self/exe", self_ec);
  const int n = static_cast<int>(gpus.size());
  std::vector<int> pids;
  std::vector<std::string> dirs;
  const char* before = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::optional<std::string> saved =
      before ? std::optional<std::string>(before) : std::nullopt;
  for (int i = 0; i < n; ++i) {
    const auto dir = shards / std::to_string(i);
    remove_tree(dir); // a fresh run: nothing of an earlier one merged into it
    std::vector<std::string> argv = rest;
    argv[0] = self_ec ? args[0] : self.string();
    argv.insert(argv.end(), {"--shard", std::to_string(i) + "/" + std::to_string(n), "--out",
                             dir.string(), "--no-progress"});
    ::setenv("CUDA_VISIBLE_DEVICES", gpus[static_cast<std::size_t>(i)].c_str(), 1);
    const auto log = shards / ("shard-" + std::to_string(i) + ".log");
    fs::remove(log, ec);
    try {
      pids.push_back(spawn_process(argv, log, process_limits{0}, {}));
    } catch (const std::exception& e) {
      err << "kernelgate: cannot start shard " << i << ": " << printable(e.what(), 300) << "\n";
      for (int p : pids)
        ::kill(-p, SIGTERM);
      return exit_code::internal;
    }
    dirs.push_back(dir.string());
    out << "shard " << i << "/" << n << " on GPU " << gpus[static_cast<std::size_t>(i)] << ": log "
        << log.string() << "\n";
  }
  if (saved)
    ::setenv("CUDA_VISIBLE_DEVICES", saved->c_str(), 1);
  else
    ::unsetenv("CUDA_VISIBLE_DEVICES");
  for (int i = 0; i < n; ++i) {
    int status = 0;
    while (::waitpid(pids[static_cast<std::size_t>(i)], &status, 0) < 0 && errno == EINTR) {
    }
    process_result r;
    describe_status(status, r);
    out << "shard " << i << "/" << n << ": " << r.describe() << "\n";
  }
  merge_options m;
  m.dirs = dirs;
  m.out = base.string();
  m.logs = shards.string();
  return run_merge_command(m, args, out, err);
}

} // namespace kg
