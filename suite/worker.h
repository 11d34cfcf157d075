// The candidate worker: `kernelgate worker MANIFEST`, run by the sandbox in a child process of
// its own (own CUDA context, own process group, resource limits). It loads the candidate's
// shared object, runs every trial of the manifest on fresh device buffers in order (so state
// kept across calls shows), and writes what it saw; it never judges correctness itself -- the
// parent compares the outputs with the fp64 oracle, out of the candidate's reach.
#pragma once

#include <string>

namespace kg {

// Manifest: {"shared_object": path, "result": path, "trials": [{"inputs": [{"file", "dtype",
// "shape"}], "outputs": [{"file", "dtype", "shape"}]}]}. Writes the result JSON: {"trials":
// [{"rc", "inputs_modified": [bool], "threads_before", "threads_after", "seconds"}], "error"}.
// Exit codes: 0 done, 2 bad manifest, 3 cannot load the candidate, 5 CUDA error (recorded).
int run_worker(const std::string& manifest_path);

} // namespace kg
