// Every task's LibTorch reference (CPU) against its fp64 oracle, with the task's own tolerance:
// two independent implementations of each op must agree, or the task cannot be trusted (its
// candidates would be judged INVALID_REFERENCE). Both shapes, one draw each.
#include <iostream>

#include <gtest/gtest.h>

#include "kernels/task_torch_refs.h"
#include "oracles/comparators.h"
#include "oracles/task_oracles.h"
#include "suite/task_catalog.h"

using namespace kg;

TEST(task_references, every_libtorch_reference_agrees_with_the_fp64_oracle) {
  const auto tasks = load_tasks(std::string(KG_SOURCE_DIR) + "/data/tasks");
  for (const auto& t : tasks) {
    ASSERT_TRUE(has_torch_reference(t.op)) << t.id << ": no LibTorch reference for op " << t.op;
    for (const auto& shape : t.shapes) {
      const auto in = make_task_inputs(t, shape, 7);
      const auto oracle = run_task_oracle(t, shape, in);
      const auto ref = run_torch_reference(t, in);
      ASSERT_TRUE(ref.has_value());
      ASSERT_TRUE(ref->error.empty()) << t.id << ": " << ref->error;
      ASSERT_EQ(ref->outputs.size(), oracle.size()) << t.id;
      for (std::size_t k = 0; k < oracle.size(); ++k) {
        const auto type = t.outputs[k].type;
        const task_tolerance tol =
            t.tolerance.count(type) ? t.tolerance.at(type) : task_tolerance{};
        ASSERT_EQ(ref->outputs[k].numel(), oracle[k].numel()) << t.id << " output " << k;
        const auto c = compare_allclose(oracle[k], ref->outputs[k], tol.atol, tol.rtol,
                                        tolerance_side::reference);
        EXPECT_EQ(c.mismatches, 0)
            << t.id << " shape " << shape.name << " output " << t.outputs[k].name << ": "
            << c.mismatches << " of " << c.numel << " outside tolerance, max abs err "
            << c.max_abs_err << " (first at " << c.first_mismatch << ")";
      }
    }
  }
}
