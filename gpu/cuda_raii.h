// RAII owners of the CUDA objects the timing harness uses. Destructors never throw; every
// creating call goes through KG_CUDA_CHECK.
#pragma once

#include <utility>

#include "gpu/cuda_check.h"

namespace kg {

class cuda_event {
public:
  cuda_event() { KG_CUDA_CHECK(cudaEventCreate(&e_)); }
  ~cuda_event() {
    if (e_) (void)cudaEventDestroy(e_);
  }
  cuda_event(const cuda_event&) = delete;
  cuda_event& operator=(const cuda_event&) = delete;
  cudaEvent_t get() const { return e_; }

private:
  cudaEvent_t e_ = nullptr;
};

class cuda_stream {
public:
  cuda_stream() { KG_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~cuda_stream() {
    if (s_) (void)cudaStreamDestroy(s_);
  }
  cuda_stream(const cuda_stream&) = delete;
  cuda_stream& operator=(const cuda_stream&) = delete;
  cudaStream_t get() const { return s_; }

private:
  cudaStream_t s_ = nullptr;
};

// Page-locked host memory mapped into the device's address space: the host writes the flag
// that releases the blocking kernel while the device polls it.
template <typename T>
class mapped_host {
public:
  mapped_host() {
    KG_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host_), sizeof(T), cudaHostAllocMapped));
    KG_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_), host_, 0));
  }
  ~mapped_host() {
    if (host_) (void)cudaFreeHost(host_);
  }
  mapped_host(const mapped_host&) = delete;
  mapped_host& operator=(const mapped_host&) = delete;
  T* host() const { return host_; }
  T* device() const { return device_; }

private:
  T* host_ = nullptr;
  T* device_ = nullptr;
};

// Page-locked host memory that grows on demand and is reused: copies between it and the device
// run at full bus speed, where a pageable copy is staged by the driver piece by piece.
class pinned_buffer {
public:
  pinned_buffer() = default;
  ~pinned_buffer() {
    if (p_) (void)cudaFreeHost(p_);
  }
  pinned_buffer(const pinned_buffer&) = delete;
  pinned_buffer& operator=(const pinned_buffer&) = delete;
  // At least `bytes` of it (what it held before is gone when it grows).
  void* reserve(std::size_t bytes) {
    if (bytes > cap_) {
      if (p_) (void)cudaFreeHost(p_);
      p_ = nullptr;
      cap_ = 0;
      KG_CUDA_CHECK(cudaHostAlloc(&p_, bytes, cudaHostAllocDefault));
      cap_ = bytes;
    }
    return p_;
  }

private:
  void* p_ = nullptr;
  std::size_t cap_ = 0;
};

class cuda_graph_exec {
public:
  cuda_graph_exec() = default;
  ~cuda_graph_exec() { reset(); }
  cuda_graph_exec(const cuda_graph_exec&) = delete;
  cuda_graph_exec& operator=(const cuda_graph_exec&) = delete;
  void reset() {
    if (exec_) (void)cudaGraphExecDestroy(exec_);
    if (graph_) (void)cudaGraphDestroy(graph_);
    exec_ = nullptr;
    graph_ = nullptr;
  }
  // Takes ownership of a captured graph and instantiates it.
  void adopt(cudaGraph_t g) {
    reset();
    graph_ = g;
    KG_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
  }
  cudaGraphExec_t get() const { return exec_; }

private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

} // namespace kg
