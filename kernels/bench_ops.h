// The four operations of kg_bench_repeatability (docs/performance.md, The timing loop), as
// kernels of our own (no cuBLAS: it is not a project dependency). They exist to compare timing
// methods side by side, not to be fast.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

namespace kg {

struct bench_op {
  virtual ~bench_op() = default;
  virtual std::string name() const = 0;
  virtual void launch(cudaStream_t s) = 0;      // one call of the op on device buffers it owns
  virtual std::string kernel_regex() const = 0; // ncu --kernel-name filter
};

// layer_norm 8192x4096 (float16: our kernels have no bf16 path), matmul 4096^3 bf16 (WMMA),
// softmax 64x1024 fp32, gemv 9728x2560 bf16; and "empty", a kernel that does nothing (each timing
// method's floor).
// With input_sets > 1, that many instances with buffers of their own, launched in turn (call i
// runs instance i % input_sets).
std::unique_ptr<bench_op> make_bench_op(const std::string& name, int input_sets = 1);
std::vector<std::string> bench_op_names();

} // namespace kg
