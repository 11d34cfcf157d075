#include "sandbox/resident_inputs.h"

#include <algorithm>

#include "gpu/cuda_raii.h"
#include "oracles/device_fingerprint.h"
#include "sandbox/worker_session.h"

namespace kg {

device_scratch::~device_scratch() {
  if (p_) (void)cudaFree(p_);
}

void* device_scratch::reserve(std::size_t bytes) {
  if (bytes > cap_) {
    if (p_) (void)cudaFree(p_);
    p_ = nullptr;
    cap_ = 0;
    check_cuda(cudaMalloc(&p_, bytes), "cudaMalloc");
    cap_ = bytes;
  }
  return p_;
}

std::size_t device_pool::rounded(std::size_t bytes) {
  constexpr std::size_t granule = 2u << 20; // cudaMalloc's own granularity for large blocks
  return (std::max<std::size_t>(bytes, 1) + granule - 1) / granule * granule;
}

device_pool::~device_pool() {
  for (const auto& [p, n] : size_of_)
    (void)cudaFree(p);
}

void* device_pool::acquire(std::size_t bytes, cudaStream_t stream) {
  const std::size_t n = rounded(bytes);
  if (const auto it = idle_.find(n); it != idle_.end()) {
    void* p = it->second;
    idle_.erase(it);
    return p;
  }
  void* p = nullptr;
  check_cuda(cudaMalloc(&p, n), "cudaMalloc");
  // Scrubbed as a reused block is, and on the stream its user writes on: a plain cudaMemset runs
  // on the legacy default stream, which a non-blocking stream does not wait for -- the scrub
  // could land after the block's first contents (on the H200 it did: NaN outputs, inputs seen as
  // modified).
  check_cuda(cudaMemsetAsync(p, 0xff, n, stream), "cudaMemsetAsync (scrub)");
  size_of_[p] = n;
  held_ += n;
  return p;
}

void device_pool::release(void* p, cudaStream_t stream) {
  const auto it = size_of_.find(p);
  if (it == size_of_.end()) return;
  check_cuda(cudaMemsetAsync(p, 0xff, it->second, stream), "cudaMemsetAsync (scrub)");
  idle_.emplace(it->second, p);
}

void device_pool::trim(std::size_t bytes) {
  while (held_ > bytes && !idle_.empty()) {
    const auto it = std::prev(idle_.end()); // the largest idle block first
    (void)cudaFree(it->second);             // (synchronizes: the scrub is done first)
    held_ -= it->first;
    size_of_.erase(it->second);
    idle_.erase(it);
  }
}

resident_inputs::~resident_inputs() { // (the pool frees the copies' blocks)
  if (slot_) (void)cudaFree(slot_);
}

const void* resident_inputs::get(const std::string& file, std::size_t bytes, pinned_buffer& staging,
                                 cudaStream_t stream) {
  if (auto it = kept_.find(file); it != kept_.end() && it->second.bytes == bytes) {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    in_use_.insert(file);
    return it->second.ptr;
  }
  drop(file, stream);
  const char* p = read_into_staging(file, bytes, staging);
  entry e;
  e.ptr = pool_.acquire(bytes, stream);
  e.bytes = bytes;
  check_cuda(cudaMemcpyAsync(e.ptr, p, bytes, cudaMemcpyHostToDevice, stream), "cudaMemcpy H2D");
  // The fingerprint of what arrived, computed on the device (a pass over the copy; on the host it
  // took longer than the copy itself).
  if (!slot_) check_cuda(cudaMalloc(reinterpret_cast<void**>(&slot_), sizeof *slot_), "cudaMalloc");
  auto* slot_host = static_cast<fingerprint_result*>(slot_host_.reserve(sizeof *slot_));
  launch_fingerprint(e.ptr, nullptr, bytes, slot_, stream);
  check_cuda(cudaMemcpyAsync(slot_host, slot_, sizeof *slot_, cudaMemcpyDeviceToHost, stream),
             "cudaMemcpy D2H (fingerprint)");
  // The staging buffer is the next upload's: this copy must be done with it first.
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (upload)");
  e.fingerprint = slot_host->fingerprint;
  lru_.push_front(file);
  e.lru = lru_.begin();
  kept_[file] = e;
  in_use_.insert(file);
  ++uploads_;
  return e.ptr;
}

std::uint64_t resident_inputs::fingerprint(const std::string& file) const {
  return kept_.at(file).fingerprint;
}

void resident_inputs::drop(const std::string& file, cudaStream_t stream) {
  const auto it = kept_.find(file);
  if (it == kept_.end()) return;
  pool_.release(it->second.ptr, stream);
  lru_.erase(it->second.lru);
  kept_.erase(it);
  in_use_.erase(file);
}

void resident_inputs::fit(std::size_t budget, cudaStream_t stream) {
  pool_.trim(budget); // idle blocks first: they cost an allocation to remake, a copy an upload
  for (auto it = lru_.end(); pool_.held_bytes() > budget && it != lru_.begin();) {
    --it;
    if (in_use_.count(*it)) continue;
    const std::string victim = *it;
    it = std::next(it); // (drop erases the node; the iterator after it stays valid)
    drop(victim, stream);
    pool_.trim(budget);
  }
}

} // namespace kg
