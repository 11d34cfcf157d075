// LoRA training with LibTorch autograd (issue: workloads under test): K jobs, each with its own
// rank-r adapters on q and v and its own batch, over one frozen base model (lora_model.h). Each
// step runs every job's forward and backward and an SGD update of its adapters. The device and
// dtype are the caller's ("cpu" / "cuda", float64 / float32 / bfloat16): the tests check it in
// float64 and float32 on the CPU against lora_reference.h; the workload runs it on the GPU.
// The LibTorch types stay behind this header (one LibTorch TU: workloads/lora_torch.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "workloads/lora_model.h"

// cudaStream_t is CUstream_st* (cuda_runtime_api.h); declared here so that this header stays free
// of CUDA as well as of LibTorch.
struct CUstream_st;

namespace kg {

struct lora_torch_options {
  std::string device = "cpu";    // a torch device string: "cpu", "cuda", "cuda:0"
  std::string dtype = "float32"; // float64 | float32 | bfloat16 (loss computed in float32 or wider)
};

struct lora_job_step {
  double loss = 0;
  std::vector<double> grad; // d loss / d adapter, lora_adapters::flat() order
};

class lora_trainer {
public:
  // Throws std::runtime_error (LibTorch's message) when the device or dtype is unusable.
  lora_trainer(const lora_config& c, const lora_base& base, const std::vector<lora_adapters>& jobs,
               const lora_torch_options& opt = {});
  // The base drawn on the device by LibTorch's generator seeded with `device_base_seed` (same
  // distributions as make_lora_base, not the same bytes): for the real model, whose weights in
  // host float64 would take 32 GB and minutes to draw. Reproducible on one device and LibTorch
  // version; the fp64 reference cannot follow it (no host copy).
  lora_trainer(const lora_config& c, std::uint64_t device_base_seed,
               const std::vector<lora_adapters>& jobs, const lora_torch_options& opt = {});
  ~lora_trainer();
  lora_trainer(const lora_trainer&) = delete;
  lora_trainer& operator=(const lora_trainer&) = delete;

  // Forward and backward of every job on its batch, then adapters -= lr * grad (lr 0: no update).
  std::vector<lora_job_step> step(const std::vector<lora_batch>& batches, double lr);
  std::vector<lora_adapters> adapters() const; // current values, as doubles

  struct impl; // (defined in lora_torch.cpp)

private:
  std::unique_ptr<impl> p_;
};

// One bf16 product C[m, n] = A[m, k] B[k, n] through LibTorch (cuBLAS on the GPU): a GEMM of the
// LoRA training step at sequence 2048 (the suites' kernel-level lora_gemm workloads). A and B are
// drawn once from `seed` (normal, sd 1) on the current CUDA device.
class torch_matmul {
public:
  // Throws std::runtime_error (torch_external_stream_unavailable's reason) without CUDA LibTorch.
  torch_matmul(std::int64_t m, std::int64_t n, std::int64_t k, std::uint64_t seed);
  ~torch_matmul();
  torch_matmul(const torch_matmul&) = delete;
  torch_matmul& operator=(const torch_matmul&) = delete;
  // Queues one product on `stream` (LibTorch's current stream for the call).
  void enqueue(CUstream_st* stream, int device);
  // Against an fp64 dot product of the bf16 operands at `samples` elements spread over C (the
  // last product's): the worst |c - ref| / (sum_i |a_i b_i|), the error relative to the
  // magnitude the dot product accumulates (bf16 output rounding alone gives <= 2^-8).
  double worst_relative_error(int samples) const;

  struct impl;

private:
  std::unique_ptr<impl> p_;
};

// Hands LibTorch's cached CUDA blocks back to the device (no-op without CUDA LibTorch): a
// session that runs LibTorch between other GPU set-ups calls it when the LibTorch work is done.
void release_torch_cuda_cache();

// Why LibTorch cannot queue its CUDA work on a stream of the caller's ("" when it can): this
// LibTorch was built without CUDA (the CPU machines' 1.13), or it sees no CUDA device.
std::string torch_external_stream_unavailable();

// Runs `fn` on the calling thread with `stream` -- a CUDA stream of device `device`, a green
// context's for instance -- as LibTorch's current CUDA stream of that thread, so the LibTorch work
// `fn` queues (a lora_trainer built and stepped inside it) runs on that stream and so on its SMs.
// Then LibTorch's cached device memory is released: its blocks were freed against `stream`, which
// the caller may destroy next, and the memory is handed back for whatever runs after.
// Throws std::runtime_error (torch_external_stream_unavailable's reason) where LibTorch has no
// CUDA; rethrows whatever `fn` throws.
void run_on_torch_stream(CUstream_st* stream, int device, const std::function<void()>& fn);

} // namespace kg
