// Does not compile: a user typo, refused before the suite runs.
#include "kg_candidate.h"
extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  return undefined_name;
}
