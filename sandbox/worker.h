// The candidate worker, run by the sandbox in a child process of its own (own CUDA context, own
// process group, resource limits). It loads the candidate's shared object, runs every trial of a
// manifest on fresh device buffers in order (so state kept across calls shows), and writes what
// it saw; it never judges correctness itself -- the parent compares the outputs with the fp64
// oracle, out of the candidate's reach.
//
// Two modes: `kernelgate worker MANIFEST` runs one manifest and exits with its code; `kernelgate
// worker --serve` (what `kernelgate eval` uses) keeps its CUDA context, timer and loaded runtime
// across manifests, which saves a process start, a context and CUPTI set-up per evaluation.
#pragma once

#include <string>

namespace kg {

// Manifest: {"shared_object": path, "result": path, "trials": [{"inputs": [{"file", "dtype",
// "shape"}], "outputs": [{"file", "dtype", "shape"}]}], "timing": {...} (optional),
// "trial_limit_seconds": S (optional)}. Writes the result JSON: {"trials": [{"rc",
// "inputs_modified": [bool], "threads_before", "threads_after", "seconds"}], "timing", "error"}.
// Codes: 0 done, 2 bad manifest, 3 cannot load the candidate, 4 an output the worker could not
// write (the harness's fault, not the candidate's), 5 CUDA error (recorded), 6 a call
// ran past trial_limit_seconds (a hang: the process ends at once, its result holds the trials
// before that call).
int run_worker(const std::string& manifest_path);

// Serve mode: reads manifest paths, one per line, from `request_fd`; after each writes "CODE
// continue" or "CODE recycle" and a newline to `reply_fd` (not stdout: a candidate may print).
// It ends its session (recycle, then exits) after a CUDA error, a candidate that left threads
// running or kept more than 256 MB of device memory, and after 200 manifests.
int run_worker_serve(int request_fd, int reply_fd);

} // namespace kg
