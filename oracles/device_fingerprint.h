// One pass over a kept input on the device: a fingerprint of its bytes and, given a second
// buffer, whether the two differ. The audit's worker keeps each task's inputs on the device from
// one candidate to the next (sandbox/resident_inputs.h); a candidate that writes out of bounds can
// land in a kept copy, so each copy is fingerprinted when it is made and checked after every call
// that uses it.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace kg {

struct fingerprint_result {
  std::uint64_t fingerprint = 0; // of `kept`
  std::uint32_t differ = 0;      // `other` given and some byte differs from `kept`
  std::uint32_t pad = 0;
};

// Enqueues the pass on `stream` and writes into *device_out (device memory, zeroed here first);
// the caller copies it back and synchronizes. `other` may be null (fingerprint only). Both
// buffers must be 16-byte aligned (cudaMalloc's are). The fingerprint is a wrapping sum over
// 16-byte words of a mix of each word with its position: the same bytes give the same value
// whatever the thread order, and a changed or moved word changes it with probability ~1 - 2^-64.
void launch_fingerprint(const void* kept, const void* other, std::size_t bytes,
                        fingerprint_result* device_out, cudaStream_t stream);

// The same on the host, for tests: the fingerprint launch_fingerprint computes for `bytes`.
std::uint64_t host_fingerprint(const void* bytes, std::size_t n);

} // namespace kg
