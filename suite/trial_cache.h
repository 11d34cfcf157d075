// The CPU side of a trial -- its inputs, the fp64 oracle's outputs and, for a peer protocol, the
// LibTorch reference's -- computed ahead, on other cores, while the GPU runs the pairs before it,
// and shared by every candidate of the task (the same trial for each: the same pure functions
// on the same seeds). One oracle call can take a third of a second single-threaded; a task has
// up to nine trials. The files a worker reads (inputs, expected outputs) are written once too.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <memory>
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
  // Nonzero: the inputs of (seed, regime) with one contiguous block of every floating activation
  // redrawn from this seed -- the same first elements, other contents (a cache keyed on a few
  // input values answers it wrongly).
  std::uint64_t variant = 0;
  std::string id() const; // task/shape/seed/regime/variant/reference
};

struct trial_data {
  std::vector<host_tensor> inputs, oracle;
  // Strict regimes other than normal: per output (float64, the output's shape) the condition
  // term added to the task's atol element by element (see condition_tolerance); empty: none.
  // Computed on first use, once: it costs two more oracle runs, and an output within the task's
  // own tolerance never needs it.
  const std::vector<host_tensor>& extra_atol() const;
  bool has_condition_term() const { return lazy_extra != nullptr; }
  struct lazy_term {
    std::once_flag once;
    std::vector<host_tensor> value;
    std::function<std::vector<host_tensor>(const trial_data&)> make;
  };
  std::shared_ptr<lazy_term> lazy_extra;
  bool reference_ran = false;         // with_reference: a LibTorch reference exists for the op
  std::vector<host_tensor> reference; // its outputs, when it ran without error
  std::string reference_error;        // why it did not
};

trial_data compute_trial(const trial_key& k);

// The tolerance a float kernel needs where the op is ill-conditioned on these inputs: the fp64
// oracle is run on the inputs with every floating element moved by one unit roundoff of the
// output's dtype, relative, in a random direction, twice; per output element the term is
// `factor` x the larger of the two moves. A backward-stable float kernel errs like a perturbation
// of its inputs of that size, so it passes; a wrong formula errs by far more. Outputs that are
// integer, or whose task tolerance is exact (0, 0), get none (empty tensor).
std::vector<host_tensor> condition_tolerance(const task_def& t, const task_shape& shape,
                                             const std::vector<host_tensor>& inputs,
                                             const std::vector<host_tensor>& oracle,
                                             std::uint64_t seed, double factor = 8.0);

// Redraws one contiguous block (an eighth of the elements, never the first eighth) of every
// floating activation input from `variant`.
void apply_variant(const task_def& t, std::vector<host_tensor>& inputs, std::uint64_t variant);

// The trial as files: every input, and every oracle output cast to float32 (what the worker's
// on-device check of timed calls compares with).
struct trial_files {
  std::vector<std::filesystem::path> inputs, expected;
};

class trial_cache {
public:
  // `file_dir`: where files() writes (one sub-folder per trial).
  explicit trial_cache(std::filesystem::path file_dir);
  // Starts computing a trial in the background (no-op if already there).
  void prefetch(const trial_key& k);
  // The trial's data: waits for a prefetched one, else computes it here. It stays cached for the
  // next candidate until forget().
  std::shared_ptr<const trial_data> take(const trial_key& k);
  // The trial's files, written on the first call (by one caller; the others wait).
  trial_files files(const trial_key& k);
  // Drops these trials (data and files): their task has no pair left to run.
  void forget(const std::vector<trial_key>& keys);

private:
  struct entry {
    std::shared_future<std::shared_ptr<const trial_data>> data;
    std::mutex files_m;
    bool written = false;
    trial_files files;
    std::filesystem::path dir;
  };
  std::shared_ptr<entry> find_or_start(const trial_key& k);
  std::filesystem::path dir_;
  std::mutex m_;
  std::map<std::string, std::shared_ptr<entry>> entries_;
  std::uint64_t next_dir_ = 0;
};

} // namespace kg
