// Byte equality of two device buffers, checked on the GPU: the worker keeps a pristine copy of
// every input on the device and compares after each call, instead of hashing inputs on the host
// (a 64 MB input took ~0.15 s to copy back and hash; the compare takes well under a millisecond).
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

namespace kg {

// Whether the `bytes` bytes at a and b (both device pointers) are identical. Runs on `stream`
// and waits for it; throws cuda_error on a CUDA failure.
bool device_equal(const void* a, const void* b, std::size_t bytes, cudaStream_t stream);

// Whether every one of the `bytes` bytes at p (a device pointer) is `value`: a guard region still
// as it was filled. Runs on `stream` and waits for it; throws cuda_error on a CUDA failure.
bool device_all_bytes(const void* p, std::size_t bytes, unsigned char value, cudaStream_t stream);

// The same two checks queued on `stream` without waiting: each sets *flag (a device word the
// caller zeroed on that stream) to 1 where the bytes differ or are not `value`. Many checks then
// cost one synchronization, where each of the functions above costs its own (with eight worker
// contexts time-sliced on one GPU, every wait is milliseconds). Throws cuda_error on a launch
// failure.
void launch_differ(const void* a, const void* b, std::size_t bytes, unsigned int* flag,
                   cudaStream_t stream);
void launch_not_value(const void* p, std::size_t bytes, unsigned char value, unsigned int* flag,
                      cudaStream_t stream);

} // namespace kg
