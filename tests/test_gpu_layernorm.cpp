// GPU tests (ctest label gpu). Each skips with a visible message where no CUDA device exists.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "gpu_test_support.h"

#include "audit_expectations.h"
#include "kernels/layernorm_backend.h"
#include "oracles/comparators.h"
#include "oracles/layernorm_oracle.h"
#include "reports/json_schema.h"
#include "reports/remove_tree.h"
#include "reports/result_schema.h"
#include "suite/cli.h"

using namespace kg;
namespace fs = std::filesystem;

namespace {

struct shape_case {
  std::int64_t rows, cols;
};
const shape_case shapes[] = {{1, 8}, {4, 127}, {7, 287}, {3, 4096}, {33, 1000}};
} // namespace

// Every CUDA formula, and the independent kernel, against the fp64 oracle of the same formula:
// float32 within 1e-5 relative-to-scale, float16 within a few half ulps.
TEST(gpu_layernorm, kernels_match_the_fp64_oracle_of_their_formula) {
  KG_REQUIRE_GPU();
  auto backend = make_cuda_layernorm_backend();
  for (dtype t : {dtype::float32, dtype::float16})
    for (const auto& s : shapes) {
      const auto in = draw_layernorm_inputs({s.rows, s.cols, t, 42});
      const double tol = t == dtype::float32 ? 2e-5 : 8e-3;
      for (affine_formula f :
           {affine_formula::reference, affine_formula::omit_all, affine_formula::omit_weight,
            affine_formula::omit_bias, affine_formula::scalar_affine, affine_formula::affine_twice,
            affine_formula::affine_before_norm}) {
        const auto y = backend->run(f, in, layernorm_eps);
        const auto o = layernorm_oracle_fp64(in, layernorm_eps, f);
        const auto r = compare_allclose(o, y, tol, tol, tolerance_side::reference);
        EXPECT_TRUE(r.pass) << info(f).name << " " << dtype_name(t) << " " << s.rows << "x"
                            << s.cols << " max abs " << r.max_abs_err;
      }
      const auto yi = backend->run_independent(in, layernorm_eps);
      const auto o = layernorm_oracle_fp64(in, layernorm_eps);
      EXPECT_TRUE(compare_allclose(o, yi, tol, tol, tolerance_side::reference).pass)
          << "independent " << dtype_name(t) << " " << s.rows << "x" << s.cols;
    }
}

// The CUDA reference and the LibTorch CPU reference agree to within a few units of roundoff at
// the output's scale (LayerNorm outputs are O(1)): both round to the dtype at the same points;
// only the float statistics (summation order) differ.
TEST(gpu_layernorm, cuda_reference_agrees_with_libtorch_reference) {
  KG_REQUIRE_GPU();
  auto cuda = make_cuda_layernorm_backend();
  auto cpu = make_torch_layernorm_backend(half_norm_path::float32_then_cast);
  for (dtype t : {dtype::float32, dtype::float16})
    for (const auto& s : shapes) {
      const auto in = draw_layernorm_inputs({s.rows, s.cols, t, 7});
      const auto a = cuda->run(affine_formula::reference, in, layernorm_eps);
      const auto b = cpu->run(affine_formula::reference, in, layernorm_eps);
      double worst = 0;
      for (std::int64_t i = 0; i < a.numel(); ++i)
        worst = std::max(worst, std::fabs(a.at(i) - b.at(i)) /
                                    (std::max(std::fabs(b.at(i)), 1.0) * unit_roundoff(t)));
      std::cout << dtype_name(t) << " " << s.rows << "x" << s.cols << ": worst difference " << worst
                << " units of roundoff\n";
      EXPECT_LE(worst, 8.0) << dtype_name(t) << " " << s.rows << "x" << s.cols;
    }
}

TEST(gpu_layernorm, cuda_audit_reproduces_the_target_table) {
  KG_REQUIRE_GPU();
  const auto dir = fs::temp_directory_path() / ("kg_gpu_audit_" + std::to_string(getpid()));
  kg::remove_tree(dir);
  std::ostringstream out, err;
  const int rc = kernelgate_main(
      {"kernelgate", "audit", "layernorm-affine", "--backend", "cuda", "--out", dir.string()}, out,
      err);
  ASSERT_EQ(rc, 0) << err.str();
  std::cout << out.str();
  std::ifstream f(dir / "result.json");
  const auto doc = nlohmann::json::parse(f);
  for (const auto& b : kg::testing::check_layernorm_summary(doc["summary"]))
    ADD_FAILURE() << b;
  for (const auto& e : validate_json(nlohmann::json::parse(result_schema_text()), doc))
    ADD_FAILURE() << e.path << ": " << e.message;
  EXPECT_EQ(doc["config"]["backend"]["backend"], "cuda");
  kg::remove_tree(dir);
}
