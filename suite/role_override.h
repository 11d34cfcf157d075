// `kernelgate run --override ROLE=FILE.cu` (issue: the nightly regression suite): a user's kernel
// for one role of the suite, so a kernel change is gated by the whole suite. The file is a
// candidate in the ABI of kernels/abi/kg_candidate.h, compiled by the candidate compiler (its
// flags and cache), checked against the role's fp64 oracle before the suite runs, then used
// everywhere the suite runs that role: the kernel-level workloads and the decode engine's
// graphs. Roles that can be overridden: gemv.qkv, gemv.o_proj, gemv.gate_up, gemv.down,
// gemv.lm_head, each in the ABI of the task qwen3_decode_linear_bf16 (in: x [B, K], w [N, K];
// out: y [B, N]; bf16). The override runs in kernelgate's process: it is the user's own kernel,
// not a candidate under suspicion (eval's worker isolation is for those).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <nlohmann/json.hpp>

namespace kg {

// Bad input for an override (exit 2): unknown role, missing file, compile error, failed oracle.
struct override_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct role_override {
  std::string role, projection; // "gemv.down", "down"
  std::filesystem::path source;
  std::string sha256; // of the source's bytes
  std::filesystem::path shared_object;
  nlohmann::json oracle = nlohmann::json::array(); // one entry per shape checked
  // Queues y = x w^T through the user's kg_run on `s`.
  cudaError_t launch(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, int batch,
                     int n, int k, cudaStream_t s) const;

  using kg_run_fn = int (*)(const void* in, int n_in, void* out, int n_out, cudaStream_t);
  kg_run_fn run = nullptr;
  std::shared_ptr<void> handle; // the dlopen'ed object, closed with the last copy
};

// The roles --override accepts.
const std::vector<std::string>& overridable_roles();

// Parses ROLE=FILE.cu, compiles FILE (the candidate compiler's flags and cache) and loads its
// kg_run. Throws override_error (one line naming the role and the problem).
role_override load_role_override(const std::string& spec);

} // namespace kg
