// The CPU side of a trial -- its inputs, the fp64 oracle's outputs and, for a peer protocol, the
// LibTorch reference's -- computed ahead, on other cores, while the GPU runs the pairs before it,
// and shared by every candidate of the task (the same trial for each: the same pure functions
// on the same seeds). One oracle call can take a third of a second single-threaded; a task has
// up to nine trials. The files a worker reads (inputs, expected outputs) are written once too.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
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
  // term added to the task's atol element by element (condition_tolerance, floored at the
  // LibTorch reference's own error); empty: none. Computed on first use, once: it costs a few
  // oracle runs and a reference run, and an output within the task's own tolerance never needs it.
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
// oracle is run on the inputs with floating elements moved by one unit roundoff of the output's
// dtype, relative -- every input at once, all up and then in random directions, and each floating
// input alone in random directions -- and per output element the term is `factor` x the larger of
// (the largest move of the first two, the sum of the magnitudes of the per-input moves). A
// backward-stable float kernel errs like such a move, so it passes; a wrong formula errs by far
// more. Moving all up keeps a reduction's terms from cancelling; summing the per-input moves
// keeps x + b + r with x ~ -r from cancelling. Outputs that are integer, or whose task tolerance
// is exact (0, 0), get none (empty tensor). Costs 2 + (floating inputs) oracle runs.
std::vector<host_tensor> condition_tolerance(const task_def& t, const task_shape& shape,
                                             const std::vector<host_tensor>& inputs,
                                             const std::vector<host_tensor>& oracle,
                                             std::uint64_t seed, double factor = 8.0);

// Raises `extra` (condition_tolerance's, per output) to at least `factor` x the task's LibTorch
// reference's own error |reference - oracle| at each element, but never past `cap` x the task's
// bound there (atol + rtol |oracle|): a reference far off at an element vouches for no more.
// Non-finite reference elements and outputs without a term are left alone.
void floor_at_reference_error(const task_def& t, const std::vector<host_tensor>& oracle,
                              const std::vector<host_tensor>& reference,
                              std::vector<host_tensor>& extra, double factor = 4.0,
                              double cap = 256.0);

// Redraws one contiguous block (an eighth of the elements, never the first eighth) of every
// floating activation input from `variant`.
void apply_variant(const task_def& t, std::vector<host_tensor>& inputs, std::uint64_t variant);

// The trial as files: every input, and every oracle output cast to float32 (what the worker's
// on-device check of timed calls compares with).
struct trial_files {
  std::vector<std::filesystem::path> inputs, expected;
  // SHA-256 over every input's dtype, shape and bytes, in order: trials of other keys whose
  // inputs are the same bytes (protocols and witness configurations that draw alike) can share
  // one call of the candidate.
  std::string inputs_sha256;
};

class trial_cache {
public:
  // `file_dir`: where each trial's files go (one sub-folder per trial). `threads`: the pool that
  // computes prefetched trials (0: one per core).
  explicit trial_cache(std::filesystem::path file_dir, unsigned threads = 0);
  ~trial_cache(); // trials still queued are dropped; the running ones finish first
  trial_cache(const trial_cache&) = delete;
  trial_cache& operator=(const trial_cache&) = delete;
  // Queues a trial for the pool, first in first out (no-op if already there): its data, then its
  // files.
  void prefetch(const trial_key& k);
  // The trial's data: waits for a running one; a queued one is computed here at once, not behind
  // the queue. It stays cached for the next candidate until forget().
  std::shared_ptr<const trial_data> take(const trial_key& k);
  // The trial's files, written once (by the pool, or here if no one has).
  trial_files files(const trial_key& k);
  // Drops these trials (data and files): their task has no pair left to run.
  void forget(const std::vector<trial_key>& keys);
  // Bytes of trial data and files held now (what a caller weighs before prefetching further).
  std::size_t resident_bytes() const { return resident_.load(); }

private:
  struct entry {
    trial_key key;
    std::atomic<bool> claimed{false}; // by the first of the pool, take() or forget()
    std::promise<std::shared_ptr<const trial_data>> promise;
    std::shared_future<std::shared_ptr<const trial_data>> data;
    std::mutex files_m; // held while the trial is computed and written
    bool written = false;
    trial_files files;
    std::filesystem::path dir;
    std::size_t bytes = 0;
  };
  std::shared_ptr<entry> find_or_queue(const trial_key& k);
  void compute(entry& e);                          // no-op unless this call claims e
  void write_files(entry& e, const trial_data& d); // holds e.files_m
  void serve();                                    // a pool thread
  std::filesystem::path dir_;
  std::mutex m_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::deque<std::shared_ptr<entry>> queue_;
  std::map<std::string, std::shared_ptr<entry>> entries_;
  std::uint64_t next_dir_ = 0;
  std::atomic<std::size_t> resident_{0};
  std::vector<std::thread> pool_;
};

} // namespace kg
