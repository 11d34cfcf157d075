// Candidates are compiled with nvcc into shared objects, in parallel, through a content-hash
// cache: the key covers the source bytes, every flag and the compiler's version, so a hit is the
// same binary the same compile would produce. Flags and the compiler's output are recorded.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kg {

struct compile_options {
  std::string nvcc;                // empty: the toolkit's nvcc kernelgate was built with
  std::filesystem::path cache_dir; // empty: $KERNELGATE_CACHE or ~/.cache/kernelgate
  int jobs = 0;                    // parallel compiles; 0: every CPU core
  double timeout_seconds = 300;
};

struct compile_result {
  std::filesystem::path source;
  bool ok = false;
  bool cached = false;
  std::filesystem::path shared_object; // valid when ok
  std::string symbol = "kg_run";       // its entry point (a batch names each member's apart)
  std::string key;                     // SHA-256 of source, flags and compiler version
  std::vector<std::string> command;
  std::string log; // the compiler's output (tail)
  double seconds = 0;
  // What nvcc took to make this object: this call's compile, or for a cache hit the time recorded
  // when the entry was made (0 where the entry predates the record). What a compile of this
  // source costs, cached or not (sandbox/candidate_batch.h sizes batches by it).
  double nvcc_seconds = 0;
};

std::vector<std::string> candidate_nvcc_flags(); // the flags every candidate is compiled with
std::filesystem::path default_cache_dir();
compile_result compile_candidate(const std::filesystem::path& cu, const compile_options& opt);
std::vector<compile_result> compile_candidates(const std::vector<std::filesystem::path>& sources,
                                               const compile_options& opt);

} // namespace kg
