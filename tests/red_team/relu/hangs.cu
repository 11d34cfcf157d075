// Red team: a kernel that never finishes (a volatile local: the loop cannot be optimized away).
#include "kg_candidate.h"
__global__ void spin() {
  volatile int never = 0;
  while (never == 0) {
  }
}
extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  spin<<<1, 1, 0, s>>>();
  return 0;
}
