// fp64 oracles of the catalog's ops: every output of a task computed in double from its inputs
// (which are read exactly as doubles). A candidate passes `strict` when every element lies within
// the task's tolerance of these values. Each oracles/task_ops_<group>.cpp defines
// register_<group>_oracles(), listed once in task_oracles.cpp (explicit calls: static
// registration objects in a static library are dropped by the linker).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "workloads/task.h"

namespace kg {

// Outputs in the order of the task's outputs, as float64 tensors of the outputs' shapes.
using task_oracle_fn = std::function<std::vector<host_tensor>(
    const task_def&, const task_shape&, const std::vector<host_tensor>& inputs)>;

bool register_task_oracle(const std::string& op, task_oracle_fn fn);
const task_oracle_fn* find_task_oracle(std::string_view op);
std::vector<std::string> task_oracle_ops();

// Runs the op's oracle; throws std::invalid_argument for an unknown op.
std::vector<host_tensor> run_task_oracle(const task_def& t, const task_shape& shape,
                                         const std::vector<host_tensor>& inputs);

// Registration functions of the op files (called once, on first lookup).
void register_elementwise_oracles();
void register_norm_oracles();
void register_single_oracles();
void register_matmul_oracles();
void register_fused_oracles();
void register_decode_oracles();

// Helpers for op files: a float64 output tensor shaped like output k of the task.
host_tensor oracle_output(const task_def& t, const task_shape& shape, std::size_t k);

} // namespace kg
