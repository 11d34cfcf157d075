// Red team: a compile error (an undeclared name).
#include "kg_candidate.h"
extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) { return not_declared_anywhere; }
