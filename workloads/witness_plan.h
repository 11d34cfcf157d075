// The witness plan of a task: the input configurations a mutant of its kernel is run on before
// any checker sees it (mutants/witness.h). Inputs must exercise what is checked, so beyond the
// task's own shapes in its own inputs the plan varies one thing at a time:
//   - every shape x every input regime the task declares (data/tasks "regimes": scaled, shifted,
//     ties, tail extremes, special values...), the task's parameter draws;
//   - every shape in the first regime with the parameters (weight, bias roles) drawn as identity
//     (weight 1, bias 0) and as N(0, 1), then, where a task has both, one role at a time
//     (weight_normal: weights N(0, 1), biases 0; bias_normal: weights 1, biases N(0, 1)): a
//     kernel that mishandles one shows on one of them, and which one says which role;
//   - extra tail shapes: the row dimension (the last symbol of the first activation's shape) at
//     v - 1 and v - 31 for each shape's value v, so a row ends in every partial block of 32, in
//     the first regime and, where declared, tail_extreme;
//   - a long reduction: the longest row 16x longer, another dimension 16x shorter (first regime).
// A configuration on which a correct kernel of the task fails is dropped later (input_suite.h):
// the plan itself need not know what each kernel supports.
#pragma once

#include <cstdint>
#include <vector>

#include "mutants/witness.h"
#include "workloads/task.h"

namespace kg {

struct witness_plan_options {
  int seeds = 1; // seeds per (shape, regime) of the task's own shapes
  // The seeds are first_seed, first_seed + 1, ...; every other configuration uses first_seed. The
  // checker audit starts them at its protocols' seed, so a configuration that draws what a
  // protocol's first trial draws (N(0,1) activations on the first shape) is the same input set,
  // and one call serves both (sandbox/mutant_audit.h).
  std::uint64_t first_seed = 1;
};

std::vector<input_config> witness_plan(const task_def& t, const witness_plan_options& opt = {});

} // namespace kg
