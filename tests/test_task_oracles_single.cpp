// The fp64 oracles of the single-op tasks (oracles/task_ops_single.cpp, task_ops_matmul.cpp) on
// inputs small enough to work out by hand; every expected value is written out with its
// arithmetic in a comment (closed forms like exp(1) come from <cmath>, never from the oracles).
#include <cmath>

#include <gtest/gtest.h>

#include "oracles/task_oracles.h"

using namespace kg;

namespace {

task_tensor tensor(const std::string& name, dtype type, std::vector<std::string> shape) {
  task_tensor t;
  t.name = name;
  t.type = type;
  t.shape = std::move(shape);
  return t;
}

// A task of one op whose tensors use the symbols of `dims`.
struct mini_task {
  task_def def;
  task_shape shape;
  std::vector<host_tensor> in;

  mini_task(const std::string& op, std::map<std::string, std::int64_t> dims) {
    def.id = "hand_" + op;
    def.op = op;
    shape = {"hand", std::move(dims)};
  }
  mini_task& input(const std::string& name, dtype type, std::vector<std::string> shape_syms,
                   std::vector<double> values) {
    def.inputs.push_back(tensor(name, type, std::move(shape_syms)));
    in.push_back(host_tensor::from_doubles(type, resolve_shape(def.inputs.back(), shape), values));
    return *this;
  }
  mini_task& output(const std::string& name, dtype type, std::vector<std::string> shape_syms) {
    def.outputs.push_back(tensor(name, type, std::move(shape_syms)));
    return *this;
  }
  mini_task& param(const std::string& key, double v) {
    def.params[key] = v;
    return *this;
  }
  std::vector<host_tensor> run() const { return run_task_oracle(def, shape, in); }
};

void expect_values(const host_tensor& y, const std::vector<double>& expected, double tol = 1e-12) {
  ASSERT_EQ(y.type, dtype::float64);
  ASSERT_EQ(y.numel(), static_cast<std::int64_t>(expected.size()));
  for (std::size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(y.at(static_cast<std::int64_t>(i)), expected[i], tol) << "element " << i;
}

// x = [[1, -2, 3], [4, 5, -6]] for the reductions and the scan.
mini_task rows_task(const std::string& op, dtype out = dtype::float32) {
  mini_task t(op, {{"R", 2}, {"C", 3}});
  t.input("x", dtype::float32, {"R", "C"}, {1, -2, 3, 4, 5, -6});
  t.output("y", out,
           op == "cumsum_lastdim" ? std::vector<std::string>{"R", "C"}
                                  : std::vector<std::string>{"R"});
  return t;
}

// The elementwise ops on x = (-2, 0, 1, 3).
mini_task unary_task(const std::string& op) {
  mini_task t(op, {{"N", 4}});
  t.input("x", dtype::float32, {"N"}, {-2, 0, 1, 3}).output("y", dtype::float32, {"N"});
  return t;
}

} // namespace

TEST(task_oracles_single, every_single_op_is_registered) {
  for (const char* op : {"gelu_tanh",   "silu",        "relu_squared",   "softplus",
                         "exp",         "abs",         "sum_lastdim",    "mean_lastdim",
                         "max_lastdim", "min_lastdim", "argmax_lastdim", "cumsum_lastdim",
                         "log_softmax", "layer_norm",  "group_norm",     "cross_entropy",
                         "mse_loss",    "rope_half",   "embedding",      "transpose_2d",
                         "matmul",      "bmm",         "gemv",           "sdpa"})
    EXPECT_NE(find_task_oracle(op), nullptr) << op;
}

TEST(task_oracles_single, elementwise_activations_match_their_formulas) {
  const double e = std::exp(1.0);
  // gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); x = 0 gives 0;
  // x = 1: u = sqrt(2/pi) * 1.044715; x = -2: u = sqrt(2/pi) * (-2 - 0.35772) =
  // -sqrt(2/pi) 2.35772; x = 3: u = sqrt(2/pi) * (3 + 1.207305) = sqrt(2/pi) 4.207305.
  const double k = std::sqrt(2.0 / M_PI);
  expect_values(unary_task("gelu_tanh").run()[0],
                {0.5 * -2 * (1 + std::tanh(-k * 2.35772)), 0.0, 0.5 * (1 + std::tanh(k * 1.044715)),
                 0.5 * 3 * (1 + std::tanh(k * 4.207305))});
  // silu(x) = x / (1 + e^-x): -2 / (1 + e^2), 0, 1 / (1 + 1/e), 3 / (1 + e^-3).
  expect_values(unary_task("silu").run()[0],
                {-2 / (1 + e * e), 0.0, 1 / (1 + 1 / e), 3 / (1 + 1 / (e * e * e))});
  // relu(x)^2: 0, 0, 1, 9.
  expect_values(unary_task("relu_squared").run()[0], {0, 0, 1, 9});
  // softplus(x) = log(1 + e^x): log(1 + e^-2), log 2, log(1 + e), log(1 + e^3).
  expect_values(unary_task("softplus").run()[0], {std::log(1 + 1 / (e * e)), std::log(2.0),
                                                  std::log(1 + e), std::log(1 + e * e * e)});
  // exp: e^-2, 1, e, e^3.
  expect_values(unary_task("exp").run()[0], {1 / (e * e), 1, e, e * e * e});
  // |x|: 2, 0, 1, 3.
  expect_values(unary_task("abs").run()[0], {2, 0, 1, 3});
}

TEST(task_oracles_single, reductions_over_the_last_dimension) {
  // Rows (1, -2, 3) and (4, 5, -6).
  expect_values(rows_task("sum_lastdim").run()[0], {2, 3});            // 1-2+3, 4+5-6
  expect_values(rows_task("mean_lastdim").run()[0], {2.0 / 3.0, 1.0}); // 2/3, 3/3
  expect_values(rows_task("max_lastdim").run()[0], {3, 5});
  expect_values(rows_task("min_lastdim").run()[0], {-2, -6});
  expect_values(rows_task("argmax_lastdim", dtype::int64).run()[0], {2, 1}); // 3 at 2, 5 at 1
  // Inclusive prefix sums: (1, 1-2, 1-2+3) and (4, 4+5, 4+5-6).
  expect_values(rows_task("cumsum_lastdim").run()[0], {1, -1, 2, 4, 9, 3});
}

TEST(task_oracles_single, argmax_takes_the_first_of_equal_maxima) {
  mini_task t("argmax_lastdim", {{"R", 1}, {"C", 4}});
  t.input("x", dtype::float32, {"R", "C"}, {1, 7, 7, -1}).output("y", dtype::int64, {"R"});
  expect_values(t.run()[0], {1}); // 7 first at index 1, not 2
}

TEST(task_oracles_single, log_softmax_rows) {
  mini_task t("log_softmax", {{"R", 2}, {"C", 2}});
  t.input("x", dtype::float32, {"R", "C"}, {0, 0, 1, 3}).output("y", dtype::float32, {"R", "C"});
  // Row (0, 0): log(1/2) each. Row (1, 3): lse = log(e + e^3) = 3 + log(1 + e^-2);
  // y = (1 - lse, 3 - lse) = (-2 - log(1 + e^-2), -log(1 + e^-2)).
  const double l = std::log(1 + std::exp(-2.0));
  expect_values(t.run()[0], {-std::log(2.0), -std::log(2.0), -2 - l, -l});
}

TEST(task_oracles_single, layer_norm_reads_eps_from_params) {
  mini_task t("layer_norm", {{"R", 2}, {"C", 2}});
  t.input("x", dtype::float32, {"R", "C"}, {1, 3, 5, 5})
      .input("weight", dtype::float32, {"C"}, {2, 3})
      .input("bias", dtype::float32, {"C"}, {0.5, -1})
      .output("y", dtype::float32, {"R", "C"})
      .param("eps", 3);
  // Row (1, 3): mean 2, variance 1, 1/sqrt(1 + eps 3) = 1/2, z = (-1/2, 1/2);
  // y = (-1/2 * 2 + 0.5, 1/2 * 3 - 1) = (-0.5, 0.5).
  // Row (5, 5): variance 0, z = 0, y = bias = (0.5, -1).
  expect_values(t.run()[0], {-0.5, 0.5, 0.5, -1});
}

TEST(task_oracles_single, group_norm_normalizes_each_group_of_channels) {
  mini_task t("group_norm", {{"N", 1}, {"C", 4}, {"HW", 2}});
  t.input("x", dtype::float32, {"N", "C", "HW"}, {1, 3, 1, 3, 0, 0, 4, 4})
      .input("weight", dtype::float32, {"C"}, {1, 2, 3, 4})
      .input("bias", dtype::float32, {"C"}, {0, 0, 1, -1})
      .output("y", dtype::float32, {"N", "C", "HW"})
      .param("groups", 2)
      .param("eps", 0);
  // Group 0 = channels 0, 1 = (1, 3, 1, 3): mean 2, variance 1, z = (-1, 1, -1, 1).
  // Group 1 = channels 2, 3 = (0, 0, 4, 4): mean 2, variance 4, z = (-1, -1, 1, 1).
  // y = z * w[c] + b[c]: c0 (-1, 1); c1 (-2, 2); c2 (-3 + 1, -3 + 1); c3 (4 - 1, 4 - 1).
  expect_values(t.run()[0], {-1, 1, -2, 2, -2, -2, 3, 3});
}

TEST(task_oracles_single, cross_entropy_is_the_mean_over_rows) {
  mini_task t("cross_entropy", {{"R", 2}, {"C", 2}});
  t.input("logits", dtype::float32, {"R", "C"}, {0, 0, 0, 2})
      .input("target", dtype::int64, {"R"}, {1, 0})
      .output("loss", dtype::float32, {"1"});
  // Row (0, 0), target 1: log(e^0 + e^0) - 0 = log 2.
  // Row (0, 2), target 0: log(1 + e^2) - 0.  Mean of the two.
  expect_values(t.run()[0], {(std::log(2.0) + std::log(1 + std::exp(2.0))) / 2});
}

TEST(task_oracles_single, mse_loss_is_the_mean_of_squares) {
  mini_task t("mse_loss", {{"N", 3}});
  t.input("pred", dtype::float32, {"N"}, {1, 2, 3})
      .input("target", dtype::float32, {"N"}, {1, 0, 5})
      .output("loss", dtype::float32, {"1"});
  expect_values(t.run()[0], {8.0 / 3.0}); // (0^2 + 2^2 + (-2)^2) / 3
}

TEST(task_oracles_single, rope_rotates_halves_by_position_and_frequency) {
  mini_task t("rope_half", {{"S", 2}, {"D", 4}});
  t.input("x", dtype::float32, {"S", "D"}, {1, 2, 3, 4, 1, 2, 3, 4})
      .output("y", dtype::float32, {"S", "D"})
      .param("theta", 100);
  // inv_freq = 100^(-0/4) = 1 and 100^(-2/4) = 0.1. Position 0: angles 0, the identity.
  // Position 1: angles 1 and 0.1; pairs (x0, x2) = (1, 3) and (x1, x3) = (2, 4):
  // y0 = 1 cos 1 - 3 sin 1, y2 = 3 cos 1 + 1 sin 1,
  // y1 = 2 cos 0.1 - 4 sin 0.1, y3 = 4 cos 0.1 + 2 sin 0.1.
  const double c1 = std::cos(1.0), s1 = std::sin(1.0), c2 = std::cos(0.1), s2 = std::sin(0.1);
  expect_values(t.run()[0],
                {1, 2, 3, 4, c1 - 3 * s1, 2 * c2 - 4 * s2, 3 * c1 + s1, 4 * c2 + 2 * s2});
}

TEST(task_oracles_single, embedding_gathers_rows_and_transpose_swaps_indices) {
  mini_task e("embedding", {{"V", 3}, {"D", 2}, {"T", 3}});
  e.input("table", dtype::bfloat16, {"V", "D"}, {1, 2, 3, 4, 5, 6})
      .input("index", dtype::int64, {"T"}, {2, 0, 2})
      .output("y", dtype::bfloat16, {"T", "D"});
  expect_values(e.run()[0], {5, 6, 1, 2, 5, 6}); // rows 2, 0, 2
  mini_task t("transpose_2d", {{"R", 2}, {"C", 3}});
  t.input("x", dtype::float32, {"R", "C"}, {1, 2, 3, 4, 5, 6})
      .output("y", dtype::float32, {"C", "R"});
  expect_values(t.run()[0], {1, 4, 2, 5, 3, 6}); // [[1, 4], [2, 5], [3, 6]]
}

TEST(task_oracles_single, matmul_bmm_and_gemv) {
  mini_task m("matmul", {{"M", 2}, {"K", 3}, {"N", 2}});
  m.input("a", dtype::bfloat16, {"M", "K"}, {1, 2, 3, 4, 5, 6})
      .input("b", dtype::bfloat16, {"K", "N"}, {1, 0, 0, 1, 1, 1})
      .output("c", dtype::bfloat16, {"M", "N"});
  // Row (1, 2, 3): (1 + 0 + 3, 0 + 2 + 3) = (4, 5); row (4, 5, 6): (4 + 6, 5 + 6) = (10, 11).
  expect_values(m.run()[0], {4, 5, 10, 11});

  mini_task b("bmm", {{"B", 2}, {"M", 1}, {"K", 2}, {"N", 1}});
  b.input("a", dtype::bfloat16, {"B", "M", "K"}, {1, 2, -1, 0.5})
      .input("b", dtype::bfloat16, {"B", "K", "N"}, {3, 4, 2, 4})
      .output("c", dtype::bfloat16, {"B", "M", "N"});
  expect_values(b.run()[0], {11, 0}); // 1*3 + 2*4; -1*2 + 0.5*4

  mini_task g("gemv", {{"N", 3}, {"K", 2}});
  g.input("w", dtype::bfloat16, {"N", "K"}, {1, 2, 3, 4, 5, 6})
      .input("x", dtype::bfloat16, {"K"}, {2, -1})
      .output("y", dtype::bfloat16, {"N"});
  expect_values(g.run()[0], {0, 2, 4}); // 2 - 2, 6 - 4, 10 - 6
}

TEST(task_oracles_single, sdpa_weights_values_by_softmax_of_scaled_scores) {
  mini_task t("sdpa", {{"S", 2}, {"D", 4}});
  t.input("q", dtype::float32, {"S", "D"}, {1, 0, 0, 0, 0, 0, 0, 0})
      .input("k", dtype::float32, {"S", "D"}, {0, 0, 0, 0, 2, 0, 0, 0})
      .input("v", dtype::float32, {"S", "D"}, {1, 2, 3, 4, 3, 2, 1, 0})
      .output("o", dtype::float32, {"S", "D"});
  // scale 1/sqrt(4) = 1/2. Query 0: scores (0, 1 * 2 / 2) = (0, 1), weights (1, e) / (1 + e),
  // o0 = (v0 + e v1) / (1 + e). Query 1: scores (0, 0), o1 = (v0 + v1) / 2 = (2, 2, 2, 2).
  const double e = std::exp(1.0);
  expect_values(t.run()[0], {(1 + 3 * e) / (1 + e), (2 + 2 * e) / (1 + e), (3 + e) / (1 + e),
                             4 / (1 + e), 2, 2, 2, 2});
}

// The decode projection (oracles/task_ops_decode.cpp): x [B=2, K=2], w [N=3, K=2].
TEST(task_oracles_decode, linear_multiplies_by_the_transposed_weight) {
  mini_task t("linear", {{"B", 2}, {"N", 3}, {"K", 2}});
  t.input("x", dtype::float32, {"B", "K"}, {1, 2, 3, 4})
      .input("w", dtype::float32, {"N", "K"}, {1, 0, 1, 1, 0.5, -1})
      .output("y", dtype::bfloat16, {"B", "N"});
  // Row 1: (1*1 + 2*0, 1*1 + 2*1, 1*0.5 - 2*1) = (1, 3, -1.5);
  // row 2: (3, 3 + 4, 1.5 - 4) = (3, 7, -2.5).
  expect_values(t.run()[0], {1, 3, -1.5, 3, 7, -2.5});
}
