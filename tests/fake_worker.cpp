// A stand-in for `kernelgate worker --serve` in the CPU tests of `kernelgate eval`'s pipeline
// (KERNELGATE_FAKE_DEVICE=1): same protocol (manifest paths on fd 3, "CODE continue|recycle" on
// fd 4), no GPU. Every output is written as zeros; a candidate whose shared object carries the
// string KG_FAKE_CRASH kills the process, one carrying KG_FAKE_HANG never answers, one carrying
// KG_FAKE_NOLOAD is answered as an object that does not load (code 3), one carrying
// KG_FAKE_VARY writes different bytes on every call (a kernel whose output varies), one carrying
// KG_FAKE_TRIAL_HANG hangs in its first call when the manifest sets a per-call limit and ends as
// the real worker's watchdog ends it (exit 6), and runs normally without one; one carrying
// KG_FAKE_NOWRITE is answered as a worker that could not write an output (code 4). Each trial's
// result carries an FNV-1a digest of its input files (what a seed reproduces) and whether the
// manifest asked for a busy stream. With KG_FAKE_MANIFEST_LOG set, each manifest's candidate and
// trial count are appended to that file ("<shared object> <trials>"); with KG_FAKE_COPY_INPUT set,
// each output is the bytes of the trial's first input instead of zeros; with KG_FAKE_RELU set, each
// output is max(x, 0) of the first input read as float32 (relu's answer: every candidate right);
// with KG_FAKE_CALL_SECONDS="A,B" each manifest's first call reports A seconds, the others B.
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "workloads/tensor.h"

int main(int argc, char** argv) {
  if (argc != 5) return 2; // worker --serve 3 4
  FILE* requests = fdopen(std::stoi(argv[3]), "r");
  const int reply_fd = std::stoi(argv[4]);
  if (write(reply_fd, "ready\n", 6) != 6) return 1; // (as the real worker, once it is up)
  char line[4096];
  while (requests && fgets(line, sizeof line, requests)) {
    std::string path(line);
    while (!path.empty() && (path.back() == '\n' || path.back() == '\r'))
      path.pop_back();
    std::ifstream in(path);
    const auto m = nlohmann::json::parse(in);
    nlohmann::json result = {{"trials", nlohmann::json::array()}};
    if (m.contains("shared_object")) { // (a correctness run; it may also name timing's sets)
      const std::string so = m.at("shared_object");
      std::printf("fake worker: %s\n", so.c_str());
      std::fflush(stdout);
      std::ifstream obj(so, std::ios::binary);
      const std::string bytes{std::istreambuf_iterator<char>(obj), {}};
      if (bytes.find("KG_FAKE_CRASH") != std::string::npos) std::raise(SIGSEGV);
      if (bytes.find("KG_FAKE_HANG") != std::string::npos)
        std::this_thread::sleep_for(std::chrono::hours(1));
      if (bytes.find("KG_FAKE_TRIAL_HANG") != std::string::npos &&
          m.value("trial_limit_seconds", 0.0) > 0) {
        std::ofstream(m.at("result").get<std::string>()) << result.dump() << "\n";
        std::fprintf(stderr, "fake worker: trial 0 ran past its limit of %g s\n",
                     m.at("trial_limit_seconds").get<double>());
        std::_Exit(6);
      }
      if (bytes.find("KG_FAKE_NOWRITE") != std::string::npos) { // as a worker with a full scratch
        result["error"] = "cannot write output file (fake) (is its scratch full?)";
        std::ofstream(m.at("result").get<std::string>()) << result.dump() << "\n";
        const std::string reply = "4 recycle\n";
        return write(reply_fd, reply.data(), reply.size()) == static_cast<ssize_t>(reply.size())
                   ? 0
                   : 1;
      }
      if (bytes.find("KG_FAKE_NOLOAD") != std::string::npos) { // as a worker that cannot dlopen it
        result["error"] = "cannot load the candidate: " + so + ": (fake) undefined symbol";
        std::ofstream(m.at("result").get<std::string>()) << result.dump() << "\n";
        const std::string reply = "3 recycle\n";
        return write(reply_fd, reply.data(), reply.size()) == static_cast<ssize_t>(reply.size())
                   ? 0
                   : 1;
      }
      if (const char* log = std::getenv("KG_FAKE_MANIFEST_LOG"))
        std::ofstream(log, std::ios::app) << so << " " << m.at("trials").size() << "\n";
      const bool vary = bytes.find("KG_FAKE_VARY") != std::string::npos;
      static unsigned calls = 0;
      // KG_FAKE_CALL_SECONDS="A,B": each manifest's first call reports A seconds, the others B.
      double first_seconds = 0, later_seconds = 0;
      if (const char* cs = std::getenv("KG_FAKE_CALL_SECONDS"))
        std::sscanf(cs, "%lf,%lf", &first_seconds, &later_seconds);
      bool first_call = true;
      for (const auto& t : m.at("trials")) {
        ++calls;
        for (const auto& o : t.at("outputs")) {
          std::size_t n = kg::dtype_size(static_cast<kg::dtype>(o.at("dtype").get<int>()));
          for (const auto& d : o.at("shape"))
            n *= d.get<std::size_t>();
          std::vector<char> data(n, 0);
          if (vary && n) data[0] = static_cast<char>(calls);
          if (std::getenv("KG_FAKE_COPY_INPUT")) { // output = the first input's bytes (relu on
            std::ifstream f(t.at("inputs").at(0).at("file").get<std::string>(), std::ios::binary);
            f.read(data.data(), static_cast<std::streamsize>(n)); // inputs in [0, 1) is that)
          }
          if (std::getenv("KG_FAKE_RELU")) { // max(x, 0) of the first input (float32): relu's
            std::ifstream f(t.at("inputs").at(0).at("file").get<std::string>(), std::ios::binary);
            f.read(data.data(), static_cast<std::streamsize>(n)); // right answer, bit for bit
            for (std::size_t k = 0; k + 4 <= n; k += 4) {
              float v;
              std::memcpy(&v, data.data() + k, 4);
              if (v < 0.0f) v = 0.0f; // (as std::max(x, 0.0) in the oracle: NaN stays NaN)
              std::memcpy(data.data() + k, &v, 4);
            }
          }
          std::ofstream(o.at("file").get<std::string>(), std::ios::binary)
              .write(data.data(), static_cast<std::streamsize>(data.size()));
        }
        std::uint64_t digest = 0xcbf29ce484222325ull;
        for (const auto& x : t.at("inputs")) {
          std::ifstream f(x.at("file").get<std::string>(), std::ios::binary);
          for (char c; f.get(c);)
            digest = (digest ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
        }
        result["trials"].push_back({{"rc", 0},
                                    {"inputs_modified", std::vector<bool>(t.at("inputs").size())},
                                    {"threads_before", 1},
                                    {"threads_after", 1},
                                    {"busy_stream", t.value("busy", false)},
                                    {"input_digest", std::to_string(digest)},
                                    {"seconds", first_call ? first_seconds : later_seconds}});
        first_call = false;
      }
    }
    std::ofstream(m.at("result").get<std::string>()) << result.dump() << "\n";
    const std::string reply = "0 continue\n";
    if (write(reply_fd, reply.data(), reply.size()) != static_cast<ssize_t>(reply.size())) return 1;
  }
  return 0;
}
