// Red team: a kernel that never finishes. The loop sleeps (an asm side effect), so the compiler
// must keep it: a loop without side effects may be deleted, which an earlier version of this
// file showed (its empty spin on a volatile local compiled to nothing and returned at once).
#include "kg_candidate.h"
__global__ void spin() {
  for (;;)
    __nanosleep(1000);
}
extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  spin<<<1, 1, 0, s>>>();
  return 0;
}
