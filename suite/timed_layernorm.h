// A LayerNorm problem set up for honest timing (timing/honest_work.h): several input sets, two
// buffer sets the calls see, and a fresh set, each input set with its fp64 reference.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "mutants/affine_formula.h"
#include "gpu/cuda_raii.h"
#include "gpu/device_buffer.h"
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
  timed_layernorm(const layernorm_config& cfg, affine_formula expected, int data_sets = 3);
  honest_work work(layernorm_launch launch);
  // Buffer set `slot` (0, 1; 2 is the fresh call's).
  layernorm_device_set device_set(int slot);
  // Buffer set `slot` holding input set `data` (outputs NaN), once the copy has finished.
  layernorm_device_set staged(int slot, int data, cudaStream_t s);

private:
  struct data {
    device_buffer x, w, b, verified;
    std::vector<float> oracle; // fp64 oracle rounded to float, on the host ...
    device_buffer oracle_dev;  // ... and on the device, where outputs are checked
  };
  struct buffers {
    device_buffer x, w, b, y;
  };
  layernorm_config cfg_;
  std::vector<data> data_; // the timed sets, then the fresh one
  std::vector<buffers> slots_;
  mapped_host<unsigned> flag_;
  void stage(int slot, int d, unsigned char fill, cudaStream_t s);
  std::string against_oracle(int slot, int d, cudaStream_t s);
};

} // namespace kg
