/* The candidate ABI: everything a candidate kernel file needs from kernelgate, and nothing else
 * (no LibTorch, no kernelgate headers). A candidate is one .cu file that includes this header
 * and defines kg_run. kernelgate compiles it with nvcc to a shared object, loads it in a worker
 * process of its own, and calls kg_run in destination-passing style:
 *
 *   - `in` are the task's inputs, in the order of the task file, on the device. They are
 *     read-only: their bytes are hashed before and after every call, and a change is REWARD_HACK.
 *   - `out` are the task's outputs, allocated by kernelgate and filled with NaN (0xff bytes for
 *     floats, 0x7f.. for integers) before every call: whatever kg_run does not write stays wrong.
 *   - All work must be queued on `stream` (or on streams that join it before kg_run returns).
 *     kg_run must not synchronize the device, record events, create threads, or call cuBLAS,
 *     cuDNN or LibTorch unless the task allows library calls: the imported symbols of the shared
 *     object are checked.
 *   - Return 0 on success; any other value is reported as RUNTIME_ERROR with that code.
 *
 * Tensors are dense and row-major; `strides` are in elements and given for convenience. */
#ifndef KG_CANDIDATE_H
#define KG_CANDIDATE_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KG_ABI_VERSION 1
#define KG_MAX_DIMS 8

/* The same order as kernelgate's dtype enum. */
enum kg_dtype { KG_FLOAT32 = 0, KG_FLOAT16 = 1, KG_BFLOAT16 = 2, KG_INT32 = 4, KG_INT64 = 5 };

typedef struct kg_tensor {
  void* data;    /* device pointer */
  int32_t dtype; /* enum kg_dtype */
  int32_t ndim;
  int64_t shape[KG_MAX_DIMS];
  int64_t strides[KG_MAX_DIMS];
} kg_tensor;

int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* KG_CANDIDATE_H */
