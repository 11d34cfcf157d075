// The CPU side of a trial -- its inputs, the fp64 oracle's outputs and, for a peer protocol, the
// LibTorch reference's -- computed ahead, on other cores, while the GPU runs the pair before it.
// (One oracle call can take a third of a second single-threaded; a task has up to nine trials.)
// The data is the same as computed inline: the same pure functions on the same seeds.
#pragma once

#include <cstdint>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "workloads/task.h"

namespace kg {

struct trial_key {
  const task_def* task = nullptr;
  const task_shape* shape = nullptr;
  std::uint64_t seed = 0;
  task_input_regime regime;
  bool with_reference = false;
  std::string id() const; // task/shape/seed/regime/reference
};

struct trial_data {
  std::vector<host_tensor> inputs, oracle;
  bool reference_ran = false;         // with_reference: a LibTorch reference exists for the op
  std::vector<host_tensor> reference; // its outputs, when it ran without error
  std::string reference_error;        // why it did not
};

trial_data compute_trial(const trial_key& k);

class trial_cache {
public:
  // Starts computing a trial in the background (no-op if already there).
  void prefetch(const trial_key& k);
  // The trial's data: waits for a prefetched one (and forgets it), else computes it here.
  trial_data take(const trial_key& k);
  // Drops what is still waiting for these keys (a pair that ended early never took its trials).
  void forget(const std::vector<trial_key>& keys);

private:
  std::mutex m_;
  std::map<std::string, std::shared_future<trial_data>> pending_;
};

} // namespace kg
