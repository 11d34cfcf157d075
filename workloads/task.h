// A task of the catalog (data/tasks/<id>.json): what a candidate kernel must compute, on which
// shapes and inputs, how close it must come, and what its speed-of-light bound is. The format is
// data/schema/task.schema.json; suite/task_catalog loads and validates the files.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "workloads/input_regimes.h"
#include "workloads/tensor.h"

namespace kg {

struct task_tensor {
  std::string name;
  dtype type = dtype::float32;
  std::string role = "activation"; // how inputs are drawn (see make_task_inputs)
  std::string upper;               // indices: exclusive upper bound (a dimension symbol or integer)
  std::vector<std::string> shape;  // dimension symbols ("R") or integers ("4")
};

struct task_shape {
  std::string name;
  std::map<std::string, std::int64_t> dims;
};

struct task_tolerance {
  double atol = 0, rtol = 0;
};

struct task_def {
  std::string id, title, kind, op, reference, file;
  nlohmann::json params = nlohmann::json::object();
  std::vector<task_tensor> inputs, outputs;
  std::vector<task_shape> shapes;
  std::string flops, min_bytes; // arithmetic over dimension symbols
  std::map<dtype, task_tolerance> tolerance;
  bool library_calls_allowed = false;
  // The input regimes valid for this op ("regimes" in the file), normal first: the strict
  // protocol draws 0 of every shape in regimes[0]. A file without the key, and a task_def made in
  // code, get all seven.
  std::vector<regime_spec> regimes = default_regimes();
};

// Evaluates + - * / and parentheses over integers, decimals and dimension symbols (double
// arithmetic). Throws std::invalid_argument naming the problem.
double eval_dim_expr(const std::string& expr, const std::map<std::string, std::int64_t>& dims);
std::int64_t resolve_dim(const std::string& dim, const task_shape& shape);
std::vector<std::int64_t> resolve_shape(const task_tensor& t, const task_shape& shape);

// Inputs drawn by role, one stream per (task, shape, input, seed):
//   activation N(0,1); uniform01 U[0,1); positive U[0.5, 2); weight 1 + 0.1 N(0,1) and bias
//   0.1 N(0,1) (never the identity: a kernel that ignores them must fail); matrix
//   N(0,1)/sqrt(last dim); indices uniform in [0, upper); mask 0/1 with probability 1/2.
std::vector<host_tensor> make_task_inputs(const task_def& t, const task_shape& shape,
                                          std::uint64_t seed);

// The same with a peer's input regime, to model its checker: `uniform01_activations` draws the
// activation role from U[0,1) (KernelBench's torch.rand); `identity_params` makes weights 1 and
// biases 0 (default module init, SOL-ExecBench's by-name generator), `normal_params` N(0,1);
// `scale` multiplies every activation afterwards (KernelBench-Verified's hidden inputs).
// `strict_regime` >= 0: floating activations drawn by fill_activation in t.regimes[strict_regime]
// from the activation role's own stream (0, normal, gives the default call's bytes); other roles
// unchanged. It cannot be combined with uniform01_activations or a scale other than 1 (throws
// std::invalid_argument; an index outside t.regimes throws std::out_of_range).
struct task_input_regime {
  bool uniform01_activations = false;
  bool identity_params = false;
  bool normal_params = false;
  // One parameter role at a time: weights N(0,1) with biases at identity (0), or the reverse.
  bool normal_weights_only = false, normal_biases_only = false;
  double scale = 1.0;
  int strict_regime = -1;
};
std::vector<host_tensor> make_task_inputs(const task_def& t, const task_shape& shape,
                                          std::uint64_t seed, const task_input_regime& regime);

} // namespace kg
