// The fp64 oracles of the fused tasks (oracles/task_ops_fused.cpp) on inputs small enough to
// work out by hand: one case per op at least, the arithmetic in a comment beside each expected
// value. Transcendental constants (e, tanh 1, cos 1, ...) are written out as decimals.
#include <gtest/gtest.h>

#include "oracles/task_oracles.h"

using namespace kg;

namespace {

// A one-op task over the symbols of `dims`, its inputs given by value.
struct hand_task {
  task_def def;
  task_shape shape;
  std::vector<host_tensor> in;

  hand_task(const std::string& op, std::map<std::string, std::int64_t> dims) {
    def.id = "hand_" + op;
    def.op = op;
    shape = {"hand", std::move(dims)};
  }
  hand_task& input(const std::string& name, dtype type, std::vector<std::string> syms,
                   std::vector<double> values) {
    def.inputs.push_back({name, type, "activation", "", std::move(syms)});
    in.push_back(host_tensor::from_doubles(type, resolve_shape(def.inputs.back(), shape), values));
    return *this;
  }
  hand_task& output(const std::string& name, dtype type, std::vector<std::string> syms) {
    def.outputs.push_back({name, type, "activation", "", std::move(syms)});
    return *this;
  }
  template <typename V>
  hand_task& param(const std::string& key, V v) {
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

// x: [M, K], w: [N, K], bias: [N] in bfloat16 (every value here is exact in bf16).
hand_task gemm_task(const std::string& op, std::int64_t M, std::int64_t N, std::int64_t K,
                    std::vector<double> x, std::vector<double> w, std::vector<double> bias) {
  hand_task t(op, {{"M", M}, {"N", N}, {"K", K}});
  t.input("x", dtype::bfloat16, {"M", "K"}, std::move(x))
      .input("w", dtype::bfloat16, {"N", "K"}, std::move(w))
      .input("bias", dtype::bfloat16, {"N"}, std::move(bias))
      .output("y", dtype::bfloat16, {"M", "N"});
  return t;
}

constexpr double sigmoid_1 = 0.7310585786300049;   // 1 / (1 + e^-1)
constexpr double sigmoid_2 = 0.8807970779778823;   // 1 / (1 + e^-2)
constexpr double sigmoid_m1 = 0.2689414213699951;  // 1 / (1 + e)
constexpr double sigmoid_m2 = 0.11920292202211755; // 1 / (1 + e^2)
constexpr double phi_1 = 0.8413447460685429;       // standard normal CDF at 1
} // namespace

TEST(task_oracles_fused, gemm_bias_relu_adds_the_bias_then_clamps) {
  // x = [[1, 2], [3, -1]], w = [[1, 0.5], [-1, 1]], bias = [0.5, -1]:
  // z00 = 1*1 + 2*0.5 + 0.5 = 2.5;  z01 = 1*-1 + 2*1 - 1 = 0
  // z10 = 3*1 - 1*0.5 + 0.5 = 3;    z11 = 3*-1 - 1*1 - 1 = -5 -> relu 0
  const auto t = gemm_task("gemm_bias_relu", 2, 2, 2, {1, 2, 3, -1}, {1, 0.5, -1, 1}, {0.5, -1});
  expect_values(t.run()[0], {2.5, 0, 3, 0});
}

TEST(task_oracles_fused, gemm_bias_gelu_is_the_exact_erf_gelu) {
  // x = [1], w = [[0.5], [0], [-0.5]], bias = [0.5, 0, -0.5]: z = [1, 0, -1];
  // gelu(z) = z * Phi(z): gelu(1) = 0.8413447460685429, gelu(0) = 0,
  // gelu(-1) = -(1 - Phi(1)) = -0.15865525393145707.
  auto t = gemm_task("gemm_bias_gelu", 1, 3, 1, {1}, {0.5, 0, -0.5}, {0.5, 0, -0.5});
  t.param("approximate", "none");
  expect_values(t.run()[0], {phi_1, 0, -(1 - phi_1)});
  // The tanh approximation is another op: the oracle refuses rather than answer for it.
  t.param("approximate", "tanh");
  EXPECT_THROW(t.run(), std::invalid_argument);
}

TEST(task_oracles_fused, gemm_bias_silu_over_a_k_that_is_not_a_multiple_of_four) {
  // K = 5 also takes the oracle's remainder path. x = [1, 1, 1, 1, 1];
  // w = [[1, 0, 0, 0, 1], [0, 0, 0, 0, 0], [0.5, 0, 0, 0, -1]], bias = [0, 0, -0.5]:
  // z = [1 + 1, 0, 0.5 - 1 - 0.5] = [2, 0, -1];
  // silu(2) = 2 * 0.8807970779778823, silu(0) = 0, silu(-1) = -0.2689414213699951.
  const auto t = gemm_task("gemm_bias_silu", 1, 3, 5, {1, 1, 1, 1, 1},
                           {1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0.5, 0, 0, 0, -1}, {0, 0, -0.5});
  expect_values(t.run()[0], {2 * sigmoid_2, 0, -sigmoid_m1});
}

TEST(task_oracles_fused, linear_residual_adds_bias_and_residual_to_the_product) {
  // x = [1, 2, 0, -1, 1], w = [[1, 1, 1, 1, 1], [0, 0, 0, 0, 2]], bias = [0.25, -0.5],
  // residual = [1, 2]: y0 = (1 + 2 + 0 - 1 + 1) + 0.25 + 1 = 4.25; y1 = 2*1 - 0.5 + 2 = 3.5.
  auto t = gemm_task("linear_residual", 1, 2, 5, {1, 2, 0, -1, 1}, {1, 1, 1, 1, 1, 0, 0, 0, 0, 2},
                     {0.25, -0.5});
  t.input("residual", dtype::bfloat16, {"M", "N"}, {1, 2});
  expect_values(t.run()[0], {4.25, 3.5});
}

TEST(task_oracles_fused, silu_gate_mul_gates_up_with_silu_of_gate) {
  // gate = [0, 1, -2], up = [3, 2, 0.5]:
  // silu(0)*3 = 0; silu(1)*2 = 2 * 0.7310585786300049; silu(-2)*0.5 = 0.5 * -2 * 0.1192029...
  hand_task t("silu_gate_mul", {{"R", 1}, {"C", 3}});
  t.input("gate", dtype::bfloat16, {"R", "C"}, {0, 1, -2})
      .input("up", dtype::bfloat16, {"R", "C"}, {3, 2, 0.5})
      .output("y", dtype::bfloat16, {"R", "C"});
  expect_values(t.run()[0], {0, 2 * sigmoid_1, 0.5 * -2 * sigmoid_m2});
}

TEST(task_oracles_fused, masked_scaled_softmax_masks_keys_per_batch_and_zeroes_empty_rows) {
  // scale 0.5, x rows (b, h): (0,0) [2, 5, 0], (0,1) [0, 9, 2], (1,0) [1, 1, 1], (1,1) [3, 3, 3];
  // mask = [[1, 0, 1], [0, 0, 0]]: key 1 of batch 0 is out for both heads, batch 1 has no key.
  // (0,0): scaled [1, -, 0] -> [e/(e+1), 0, 1/(e+1)] = [0.73105..., 0, 0.26894...]
  // (0,1): scaled [0, -, 1] -> [1/(e+1), 0, e/(e+1)]; the 9 of the masked key never counts.
  // batch 1: every key masked -> 0 in every element (the task's definition).
  hand_task t("masked_scaled_softmax", {{"B", 2}, {"H", 2}, {"Q", 1}, {"S", 3}});
  t.input("x", dtype::float32, {"B", "H", "Q", "S"}, {2, 5, 0, 0, 9, 2, 1, 1, 1, 3, 3, 3})
      .input("mask", dtype::int32, {"B", "S"}, {1, 0, 1, 0, 0, 0})
      .output("y", dtype::float32, {"B", "H", "Q", "S"})
      .param("scale", 0.5);
  expect_values(t.run()[0], {sigmoid_1, 0, sigmoid_m1, sigmoid_m1, 0, sigmoid_1, 0, 0, 0, 0, 0, 0});
}

TEST(task_oracles_fused, add_layernorm_normalizes_the_sum_with_weight_bias_and_eps) {
  // x = [1, 2, 3, 4], residual = [1, 0, 1, 0]: h = [2, 2, 4, 4]; mean 3, population variance 1;
  // eps 3: 1 / sqrt(1 + 3) = 0.5, so (h - 3) * 0.5 = [-0.5, -0.5, 0.5, 0.5];
  // weight [1, 2, 0.5, 1], bias [0, 1, 0, -1]: y = [-0.5, 0, 0.25, -0.5].
  hand_task t("add_layernorm", {{"R", 1}, {"C", 4}});
  t.input("x", dtype::float32, {"R", "C"}, {1, 2, 3, 4})
      .input("residual", dtype::float32, {"R", "C"}, {1, 0, 1, 0})
      .input("weight", dtype::float32, {"C"}, {1, 2, 0.5, 1})
      .input("bias", dtype::float32, {"C"}, {0, 1, 0, -1})
      .output("h", dtype::float32, {"R", "C"})
      .output("y", dtype::float32, {"R", "C"})
      .param("eps", 3.0);
  const auto out = t.run();
  expect_values(out[0], {2, 2, 4, 4});
  expect_values(out[1], {-0.5, 0, 0.25, -0.5});
}

TEST(task_oracles_fused, add_layernorm_normalizes_the_sum_as_stored_in_hs_dtype) {
  // h in bf16: x = [1, 0, -1], residual = [2^-9, 0, 0]; 1 + 2^-9 is under half a bf16 ulp of 1
  // (2^-8), so the stored h is [1, 0, -1]: mean 0, and the middle element normalizes to exactly
  // 0 (from the exact sum it would be -mean / sigma != 0). The h output itself is the exact sum.
  // eps 0, var = 2/3: y = [1, 0, -1] / sqrt(2/3) = [1.2247448713915890, 0, -1.2247448713915890].
  hand_task t("add_layernorm", {{"R", 1}, {"C", 3}});
  t.input("x", dtype::bfloat16, {"R", "C"}, {1, 0, -1})
      .input("residual", dtype::float32, {"R", "C"}, {1.0 / 512, 0, 0})
      .input("weight", dtype::float32, {"C"}, {1, 1, 1})
      .input("bias", dtype::float32, {"C"}, {0, 0, 0})
      .output("h", dtype::bfloat16, {"R", "C"})
      .output("y", dtype::bfloat16, {"R", "C"})
      .param("eps", 0.0);
  const auto out = t.run();
  expect_values(out[0], {1 + 1.0 / 512, 0, -1});
  expect_values(out[1], {1.2247448713915890, 0, -1.2247448713915890});
}

TEST(task_oracles_fused, bias_residual_broadcasts_the_bias_over_rows) {
  // x = [[1, 2], [3, 4]], bias = [0.5, -1], residual = [[-1, 0.25], [2, -3]]:
  // y = [1 + 0.5 - 1, 2 - 1 + 0.25, 3 + 0.5 + 2, 4 - 1 - 3] = [0.5, 1.25, 5.5, 0].
  hand_task t("bias_residual", {{"R", 2}, {"C", 2}});
  t.input("x", dtype::bfloat16, {"R", "C"}, {1, 2, 3, 4})
      .input("bias", dtype::bfloat16, {"C"}, {0.5, -1})
      .input("residual", dtype::bfloat16, {"R", "C"}, {-1, 0.25, 2, -3})
      .output("y", dtype::bfloat16, {"R", "C"});
  expect_values(t.run()[0], {0.5, 1.25, 5.5, 0});
}

TEST(task_oracles_fused, rmsnorm_qk_per_head_normalizes_each_head_with_its_own_weight) {
  // head_dim 4, eps 0. q heads: [1, 1, 1, 1] (rms 1) and [2, -2, 2, -2] (rms 2 -> [1, -1, 1, -1]),
  // times q_weight [1, 2, 0.5, -1]: [1, 2, 0.5, -1] and [1, -2, 0.5, 1].
  // k head [3, 0, 0, 4]: mean square 25/4, rms 2.5 -> [1.2, 0, 0, 1.6], times k_weight
  // [0.5, 1, 1, 2]: [0.6, 0, 0, 3.2].
  hand_task t("rmsnorm_qk_per_head", {{"T", 1}, {"HQ", 2}, {"HK", 1}, {"D", 4}});
  t.input("q", dtype::bfloat16, {"T", "HQ", "D"}, {1, 1, 1, 1, 2, -2, 2, -2})
      .input("k", dtype::bfloat16, {"T", "HK", "D"}, {3, 0, 0, 4})
      .input("q_weight", dtype::bfloat16, {"D"}, {1, 2, 0.5, -1})
      .input("k_weight", dtype::bfloat16, {"D"}, {0.5, 1, 1, 2})
      .output("q_out", dtype::bfloat16, {"T", "HQ", "D"})
      .output("k_out", dtype::bfloat16, {"T", "HK", "D"})
      .param("eps", 0.0);
  const auto out = t.run();
  expect_values(out[0], {1, 2, 0.5, -1, 1, -2, 0.5, 1});
  expect_values(out[1], {0.6, 0, 0, 3.2});
}

TEST(task_oracles_fused, rope_qk_rotates_halves_by_position_times_inverse_frequency) {
  // head_dim 4 (pairs (0, 2) and (1, 3)), theta 100: inv_freq = [100^0, 100^(-2/4)] = [1, 0.1].
  // Token 0 at position 0 is unchanged. Token 1 at position 1: angles 1 and 0.1, with
  // c1 = cos 1, s1 = sin 1, c2 = cos 0.1, s2 = sin 0.1. q = [1, 2, 3, 4]:
  // [1 c1 - 3 s1, 2 c2 - 4 s2, 3 c1 + 1 s1, 4 c2 + 2 s2]; k = [0, 1, 0, 0]: [0, c2, 0, s2].
  const double c1 = 0.5403023058681398, s1 = 0.8414709848078965;
  const double c2 = 0.9950041652780258, s2 = 0.09983341664682815;
  hand_task t("rope_qk", {{"T", 2}, {"HQ", 1}, {"HK", 1}, {"D", 4}});
  t.input("q", dtype::bfloat16, {"T", "HQ", "D"}, {1, -2, 0.5, 4, 1, 2, 3, 4})
      .input("k", dtype::bfloat16, {"T", "HK", "D"}, {1, 0, 0, 0, 0, 1, 0, 0})
      .input("positions", dtype::int64, {"T"}, {0, 1})
      .output("q_out", dtype::bfloat16, {"T", "HQ", "D"})
      .output("k_out", dtype::bfloat16, {"T", "HK", "D"})
      .param("theta", 100.0);
  const auto out = t.run();
  expect_values(
      out[0], {1, -2, 0.5, 4, 1 * c1 - 3 * s1, 2 * c2 - 4 * s2, 3 * c1 + 1 * s1, 4 * c2 + 2 * s2});
  expect_values(out[1], {1, 0, 0, 0, 0, c2, 0, s2});
}

TEST(task_oracles_fused, softmax_cross_entropy_is_logsumexp_minus_the_target_logit) {
  // Row 0: logits [0, 0, 0], target 1: log(3) - 0 = 1.0986122886681098.
  // Row 1: logits [1, 2, 3], target 2: log(e + e^2 + e^3) - 3 = log(1 + e^-1 + e^-2)
  //   = log(1 + 0.36787944117144233 + 0.1353352832366127) = log(1.5032147244080551)
  //   = 0.4076059644443804.
  hand_task t("softmax_cross_entropy", {{"R", 2}, {"V", 3}});
  t.input("logits", dtype::bfloat16, {"R", "V"}, {0, 0, 0, 1, 2, 3})
      .input("targets", dtype::int64, {"R"}, {1, 2})
      .output("loss", dtype::float32, {"R"});
  expect_values(t.run()[0], {1.0986122886681098, 0.4076059644443804});
  // A target outside the vocabulary has no loss.
  t.in[1].set(1, 3);
  EXPECT_THROW(t.run(), std::invalid_argument);
}

TEST(task_oracles_fused, scale_bias_tanh_scales_then_adds_the_column_bias) {
  // scale 0.5, bias [0, 1]; x = [[2, -4], [0, 2]]: z = [[1, -2 + 1], [0, 1 + 1]] = [[1, -1], [0,
  // 2]]; tanh: [0.7615941559557649, -0.7615941559557649, 0, 0.9640275800758169].
  hand_task t("scale_bias_tanh", {{"R", 2}, {"C", 2}});
  t.input("x", dtype::float32, {"R", "C"}, {2, -4, 0, 2})
      .input("bias", dtype::float32, {"C"}, {0, 1})
      .output("y", dtype::float32, {"R", "C"})
      .param("scale", 0.5);
  expect_values(t.run()[0], {0.7615941559557649, -0.7615941559557649, 0, 0.9640275800758169});
}

TEST(task_oracles_fused, attention_decode_step_maps_query_heads_to_their_kv_group) {
  // B 1, HQ 4, HK 2 (query heads 0, 1 read kv head 0; 2, 3 read kv head 1), S 2, D 2, scale 0.5.
  // kv 0: k = [[1, 0], [0, 0]], v = [[2, 0], [0, 4]]; kv 1: k = 0, v = [[10, 10], [20, 30]].
  // head 0, q = [2, 0]: scores 0.5 * [2, 0] = [1, 0] -> p = [e/(e+1), 1/(e+1)]
  //   o = [2 * 0.7310585786300049, 4 * 0.2689414213699951].
  // head 1, q = [0, 0]: p = [0.5, 0.5] -> o = [1, 2] (kv head 1 would give [15, 20]).
  // heads 2, 3: k = 0 -> p = [0.5, 0.5] -> o = [15, 20] whatever q is.
  hand_task t("attention_decode_step", {{"B", 1}, {"HQ", 4}, {"HK", 2}, {"S", 2}, {"D", 2}});
  t.input("q", dtype::bfloat16, {"B", "HQ", "D"}, {2, 0, 0, 0, 5, -3, 1, 1})
      .input("k_cache", dtype::bfloat16, {"B", "HK", "S", "D"}, {1, 0, 0, 0, 0, 0, 0, 0})
      .input("v_cache", dtype::bfloat16, {"B", "HK", "S", "D"}, {2, 0, 0, 4, 10, 10, 20, 30})
      .output("o", dtype::bfloat16, {"B", "HQ", "D"})
      .param("scale", 0.5);
  expect_values(t.run()[0], {2 * sigmoid_1, 4 * sigmoid_m1, 1, 2, 15, 20, 15, 20});
}
