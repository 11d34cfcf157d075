// KG_CUDA_CHECK wraps every CUDA runtime call: a failure becomes a kg::cuda_error naming the call,
// the file and line, and the CUDA error string, so one bad call never passes silently.
#pragma once

#include <stdexcept>
#include <string>

#include <cuda_runtime_api.h>

namespace kg {

struct cuda_error : std::runtime_error {
  cudaError_t code;
  cuda_error(cudaError_t c, const std::string& what) : std::runtime_error(what), code(c) {}
};

[[noreturn]] inline void throw_cuda_error(cudaError_t e, const char* call, const char* file,
                                          int line) {
  throw cuda_error(e, std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                          cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

} // namespace kg

#define KG_CUDA_CHECK(call)                                                                        \
  do {                                                                                             \
    const cudaError_t kg_cuda_status_ = (call);                                                    \
    if (kg_cuda_status_ != cudaSuccess)                                                            \
      ::kg::throw_cuda_error(kg_cuda_status_, #call, __FILE__, __LINE__);                          \
  } while (0)
