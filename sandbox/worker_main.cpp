// kg_worker: the candidate worker alone (sandbox/worker.h), without the rest of kernelgate. The
// sandbox starts it instead of `kernelgate worker` when it sits beside the kernelgate executable
// (suite/worker_paths.h): it links no LibTorch, cuBLAS or cuBLASLt, so a worker start -- one after
// every candidate that crashes or hangs -- pays for the CUDA runtime, CUPTI and its own code only.
// Same arguments as `kernelgate worker` (the leading "worker" is optional), same code.
#include <charconv>
#include <cstdio>
#include <string>
#include <vector>

#include "sandbox/worker.h"
#include "timing/interrupt.h"

int main(int argc, char** argv) {
  kg::install_interrupt_handlers(); // as kernelgate's main does for every command
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args.front() == "worker") args.erase(args.begin());
  if (args.size() == 1 && args[0] != "--serve") return kg::run_worker(args[0]);
  if (args.size() == 3 && args[0] == "--serve") {
    int fds[2] = {-1, -1};
    for (int k = 0; k < 2; ++k) {
      const auto& a = args[1 + static_cast<std::size_t>(k)];
      const auto [p, ec] = std::from_chars(a.data(), a.data() + a.size(), fds[k]);
      if (ec != std::errc() || p != a.data() + a.size() || fds[k] < 0) fds[k] = -1;
    }
    if (fds[0] >= 0 && fds[1] >= 0) return kg::run_worker_serve(fds[0], fds[1]);
  }
  std::fputs("kg_worker: takes [worker] MANIFEST, or [worker] --serve REQUEST_FD REPLY_FD\n",
             stderr);
  return 2; // exit_code::bad_input, as `kernelgate worker` answers
}
