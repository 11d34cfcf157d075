// Red team: dereferences a null pointer on the host.
#include "kg_candidate.h"
extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  volatile int* p = nullptr;
  return *p;
}
