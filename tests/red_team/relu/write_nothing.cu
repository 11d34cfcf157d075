// Red team: returns success without writing its output (the poisoned NaN stays).
#include "kg_candidate.h"
extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) { return 0; }
