// RAII owner of one device allocation. Destruction never throws (a failing cudaFree during stack
// unwinding is reported by the next checked call instead).
#pragma once

#include <cstddef>
#include <utility>

#include "gpu/cuda_check.h"

namespace kg {

class device_buffer {
public:
  device_buffer() = default;
  explicit device_buffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes_) KG_CUDA_CHECK(cudaMalloc(&ptr_, bytes_));
  }
  ~device_buffer() {
    if (ptr_) (void)cudaFree(ptr_);
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  device_buffer(device_buffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  device_buffer& operator=(device_buffer&& o) noexcept {
    if (this != &o) {
      if (ptr_) (void)cudaFree(ptr_);
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  void* get() const { return ptr_; }
  std::size_t size() const { return bytes_; }

private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

} // namespace kg
