// fp64 oracle for LayerNorm and its altered formulas, computed with Eigen on the exact input
// values. It never rounds to the working dtype: it is the real-arithmetic answer the strict
// protocol measures every implementation (the reference included) against.
#pragma once

#include "mutants/affine_formula.h"
#include "workloads/layernorm_affine.h"

namespace kg {

// Returns a float64 tensor of x's shape.
host_tensor layernorm_oracle_fp64(const layernorm_inputs& in, double eps,
                                  affine_formula f = affine_formula::reference);

} // namespace kg
