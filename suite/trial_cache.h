// The CPU side of a trial -- its inputs, the fp64 oracle's outputs and, for a peer protocol, the
// LibTorch reference's -- computed ahead, on other cores, while the GPU runs the pairs before it,
// and shared by every candidate of the task (the same trial for each: the same pure functions
// on the same seeds). One oracle call can take a third of a second single-threaded; a task has
// up to nine trials. The files a worker reads (inputs, expected outputs) are written once too.
#pragma once

#include <cstdint>
#include <filesystem>
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
  std::string id() const; // task/shape/seed/regime/reference
};

struct trial_data {
  std::vector<host_tensor> inputs, oracle;
  bool reference_ran = false;         // with_reference: a LibTorch reference exists for the op
  std::vector<host_tensor> reference; // its outputs, when it ran without error
  std::string reference_error;        // why it did not
};

trial_data compute_trial(const trial_key& k);

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
