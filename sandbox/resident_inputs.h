// The audit worker's device memory (sandbox/worker.cpp, manifests with "resident_bytes"): the
// audit runs thousands of candidates of one task on the same few dozen input sets, so a worker
// keeps those sets on the device from one candidate to the next and reuses its buffers, instead
// of reading each input file, allocating, copying and freeing for every trial (cudaMalloc and
// cudaFree synchronize, and with eight workers sharing the GPU each wait costs milliseconds).
//   - device_pool: blocks by rounded size. A released block is scrubbed (0xff, on the stream)
//     before it can be handed out again, as a freed device_tensor is: no candidate finds an
//     earlier one's output in a buffer it is given.
//   - resident_inputs: one kept copy per input file, fingerprinted when uploaded and checked
//     after every call that uses it (oracles/device_fingerprint.h). A candidate that writes out
//     of bounds may hit a kept copy; a copy whose fingerprint changed is uploaded again and the
//     trial run once more (sandbox/worker.cpp).
// Both stay within one byte budget, least recently used first out.
//   - pooled_buffers: the audit's default (manifests with "pool_bytes"): every trial reads its
//     inputs from their files as a fresh trial does, with the same guards, but into pool blocks,
//     and its checks and copies back wait once (sandbox/worker.cpp, pooled_trial).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <set>
#include <string>

#include <cuda_runtime_api.h>

#include "gpu/cuda_raii.h"
#include "oracles/device_fingerprint.h"

namespace kg {

// Device memory that grows on demand and never shrinks, as pinned_buffer is on the host: the few
// words a trial's checks land in, reused trial after trial. Throws cuda_failure.
class device_scratch {
public:
  device_scratch() = default;
  ~device_scratch();
  device_scratch(const device_scratch&) = delete;
  device_scratch& operator=(const device_scratch&) = delete;
  // At least `bytes` of it (what it held before is gone when it grows).
  void* reserve(std::size_t bytes);

private:
  void* p_ = nullptr;
  std::size_t cap_ = 0;
};

class device_pool {
public:
  device_pool() = default;
  ~device_pool();
  device_pool(const device_pool&) = delete;
  device_pool& operator=(const device_pool&) = delete;
  // A block of at least `bytes`, filled with 0xff by work queued on `stream` (the caller's uses
  // must be on that stream or after a synchronization). Throws cuda_failure when the device has
  // no memory for it.
  void* acquire(std::size_t bytes, cudaStream_t stream);
  // Back into the pool, scrubbed on `stream` first (the next acquire's use is on that stream).
  void release(void* p, cudaStream_t stream);
  // Frees idle blocks until the pool holds at most `bytes` (idle and in use together).
  void trim(std::size_t bytes);
  std::size_t held_bytes() const { return held_; }
  static std::size_t rounded(std::size_t bytes); // what acquire allocates for `bytes`

private:
  std::multimap<std::size_t, void*> idle_; // rounded size -> block
  std::map<void*, std::size_t> size_of_;   // every block, idle or in use
  std::size_t held_ = 0;
};

class resident_inputs {
public:
  explicit resident_inputs(device_pool& pool) : pool_(pool) {}
  ~resident_inputs();
  resident_inputs(const resident_inputs&) = delete;
  resident_inputs& operator=(const resident_inputs&) = delete;
  // The kept copy of `file` (which must hold `bytes`), uploaded through `staging` if missing or
  // dropped. Throws cuda_failure on a wrong-sized file or a CUDA error.
  const void* get(const std::string& file, std::size_t bytes, pinned_buffer& staging,
                  cudaStream_t stream);
  // The fingerprint recorded when `file` was uploaded.
  std::uint64_t fingerprint(const std::string& file) const;
  // Drops the kept copy of `file` (its fingerprint changed: something wrote into it).
  void drop(const std::string& file, cudaStream_t stream);
  // Drops least recently used copies, then idle pool blocks, until both hold at most `budget`
  // bytes; never a copy that `get` returned since the last `settle` (the current trial's).
  void fit(std::size_t budget, cudaStream_t stream);
  void settle() { in_use_.clear(); }
  std::size_t uploads() const { return uploads_; }

private:
  struct entry {
    void* ptr = nullptr;
    std::size_t bytes = 0;
    std::uint64_t fingerprint = 0;
    std::list<std::string>::iterator lru;
  };
  device_pool& pool_;
  std::map<std::string, entry> kept_;
  std::list<std::string> lru_;   // most recent first
  std::set<std::string> in_use_; // returned by get since the last settle
  std::size_t uploads_ = 0;
  fingerprint_result* slot_ = nullptr; // device: an upload's fingerprint lands here
  pinned_buffer slot_host_;
};

// What a worker session keeps for resident manifests: the pool, the kept inputs, and the small
// buffers the fingerprint checks land in.
struct resident_state {
  device_pool pool;
  resident_inputs inputs{pool};         // (after the pool: destroyed before it)
  device_scratch checks;
  pinned_buffer checks_host;
  // Room for n results on the device.
  fingerprint_result* checks_for(std::size_t n) {
    return static_cast<fingerprint_result*>(checks.reserve(n * sizeof(fingerprint_result)));
  }
};

// What a worker session keeps for pooled manifests: the pool, and the check flags (one device word
// per check, with a page-locked copy).
struct pooled_buffers {
  device_pool pool;
  device_scratch flags;
  pinned_buffer flags_host;
  // Room for n flags on the device.
  unsigned int* flags_for(std::size_t n) {
    return static_cast<unsigned int*>(flags.reserve(n * sizeof(unsigned int)));
  }
};

} // namespace kg
