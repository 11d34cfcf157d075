// Equivalent mutants by machine code (sandbox/sass_equivalence.h), compiled with the toolkit's
// nvcc (no GPU needed): a planted equivalent mutant (a constant of a dead variable changed) has
// the original's cubin; a live constant's mutant does not; host code is never judged this way.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "mutants/mutant_catalog.h"
#include "sandbox/sass_equivalence.h"
#include "scratch_dir.h"

using namespace kg;
namespace fs = std::filesystem;

namespace {

const std::string source = "__global__ void twice(const float* x, float* y, int n) {\n"
                           "  float unused = 3.0f;\n"
                           "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                           "  if (i < n) y[i] = x[i] * 2.0f;\n"
                           "}\n"
                           "int blocks_for(int n) { return (n + 255) / 256; }\n";

const mutant& first_of(const std::vector<mutant>& all, const std::string& original,
                       const std::string& rule) {
  const auto it = std::find_if(all.begin(), all.end(), [&](const mutant& m) {
    return m.original == original && m.rule == rule;
  });
  if (it == all.end()) throw std::runtime_error("no " + rule + " mutant of " + original);
  return *it;
}

} // namespace

TEST(sass_equivalence, a_dead_constant_mutant_has_the_originals_cubin_a_live_one_does_not) {
  const auto all = generate_mutants(source, "kernels/tasks/twice.cu", "twice");
  const auto& dead = first_of(all, "3.0f", "float_constant_perturb");
  const auto& live = first_of(all, "2.0f", "float_constant_perturb");
  EXPECT_TRUE(in_device_only_code(source, dead.offset));
  EXPECT_TRUE(in_device_only_code(source, live.offset));
  const auto dir = kg::test::scratch_dir("sass-equivalence");
  const auto original = compile_cubin_digest(source, dir / "original");
  const auto dead_digest = compile_cubin_digest(apply_mutant(source, dead), dir / "dead");
  const auto live_digest = compile_cubin_digest(apply_mutant(source, live), dir / "live");
  ASSERT_TRUE(original && dead_digest && live_digest)
      << kg::test::slurp(dir / "original" / "compile.log");
  EXPECT_EQ(*dead_digest, *original); // equivalent: marked so without running
  EXPECT_NE(*live_digest, *original);
  // Compiling the same source again gives the same digest (nothing time- or path-dependent).
  EXPECT_EQ(compile_cubin_digest(source, dir / "again"), original);
}

TEST(sass_equivalence, host_code_and_bad_input_are_never_judged_equivalent) {
  // The launch arithmetic of blocks_for is host code: not in the cubin, so never comparable.
  const auto host_at = source.find("255");
  EXPECT_FALSE(in_device_only_code(source, host_at));
  const std::string both = "__host__ __device__ float half(float v) { return v * 0.5f; }\n";
  EXPECT_FALSE(in_device_only_code(both, both.find("0.5f")));
  const auto dir = kg::test::scratch_dir("sass-equivalence");
  EXPECT_FALSE(compile_cubin_digest("__global__ void k( {", dir / "broken"));
  EXPECT_TRUE(fs::exists(dir / "broken" / "compile.log"));
  EXPECT_THROW(cubin_code_digest("not an elf at all, not even close to one......................"),
               std::invalid_argument);
  ASSERT_TRUE(compile_cubin_digest(source, dir / "cut"));
  std::ifstream in(dir / "cut" / "kernel.cubin", std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  const auto elf = bytes.str();
  EXPECT_THROW(cubin_code_digest(std::string_view(elf).substr(0, elf.size() / 2)),
               std::invalid_argument);
}
