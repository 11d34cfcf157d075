// A LayerNorm problem set up for honest timing: several input sets (different contents and
// pointers) plus a fresh set, each with its fp64 reference for checking outputs.
#pragma once

#include <functional>
#include <vector>

#include "mutants/affine_formula.h"
#include "timing/cuda_raii.h"
#include "timing/device_buffer.h"
#include "timing/honest_work.h"
#include "workloads/layernorm_affine.h"

namespace kg {

struct layernorm_device_set {
  const void* x;
  const void* w;
  const void* b;
  void* y;
  std::int64_t rows, cols;
  dtype type;
};
using layernorm_launch = std::function<void(const layernorm_device_set&, cudaStream_t)>;

class timed_layernorm {
public:
  // `expected`: the formula whose fp64 oracle defines a right output (an altered formula is
  // timed against its own definition). Sets are drawn from seeds cfg.seed, cfg.seed + 1, ...
  timed_layernorm(const layernorm_config& cfg, affine_formula expected, int timed_sets = 2);
  honest_work work(layernorm_launch launch);
  layernorm_device_set device_set(int i);

private:
  struct set {
    device_buffer x, w, b, y;
    std::vector<float> oracle; // fp64 oracle rounded to float, on the host ...
    device_buffer oracle_dev;  // ... and on the device, where outputs are checked
  };
  layernorm_config cfg_;
  std::vector<set> sets_;
  int timed_sets_;
  cuda_stream check_stream_;
  std::string check(int i);
};

} // namespace kg
