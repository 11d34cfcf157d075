// The task catalog: every file in data/tasks loads; bad files fail with the file and the field
// named; dimension expressions and role-based inputs behave as documented.
#include <cstring>
#include <filesystem>
#include <memory>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "reports/remove_tree.h"
#include "suite/task_catalog.h"
#include "sandbox/trial_cache.h"

using namespace kg;
namespace fs = std::filesystem;

namespace {
const char* good = R"json({
  "id": "t", "title": "a task", "kind": "single", "op": "relu", "reference": "torch.relu(x)",
  "inputs": [{"name": "x", "dtype": "float32", "role": "activation", "shape": ["R", "C"]}],
  "outputs": [{"name": "y", "dtype": "float32", "shape": ["R", "C"]}],
  "shapes": [{"name": "a", "dims": {"R": 4, "C": 8}}, {"name": "b", "dims": {"R": 3, "C": 5}}],
  "flops": "R*C", "min_bytes": "8*R*C",
  "tolerance": {"float32": {"atol": 0, "rtol": 0}}, "library_calls": "forbidden"})json";

fs::path write_task(const std::string& text, const std::string& id = "t") {
  // Removed when the test process ends: tests leave nothing in /tmp.
  static const struct root {
    fs::path p = fs::temp_directory_path() / ("kg-task-test-" + std::to_string(::getpid()));
    ~root() { remove_tree(p); }
  } r;
  const fs::path dir = r.p;
  fs::create_directories(dir);
  const fs::path f = dir / (id + ".json");
  std::ofstream(f) << text;
  return f;
}

std::string error_of(const std::string& text) {
  const auto f = write_task(text);
  try {
    (void)load_task(f);
  } catch (const task_error& e) {
    return e.what();
  }
  return "";
}

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  s.replace(s.find(from), from.size(), to);
  return s;
}
} // namespace

TEST(task_catalog, every_task_file_of_the_catalog_loads) {
  const auto tasks = load_tasks(std::string(KG_SOURCE_DIR) + "/data/tasks");
  ASSERT_GE(tasks.size(), 4u);
  for (const auto& t : tasks) {
    EXPECT_GE(t.shapes.size(), 2u) << t.id;
    EXPECT_TRUE(fs::exists(fs::path(KG_SOURCE_DIR) / "kernels" / "tasks" / (t.id + ".cu")))
        << t.id << " has no verified kernel in kernels/tasks";
  }
}

TEST(task_catalog, a_good_file_loads_with_its_fields) {
  const auto t = load_task(write_task(good));
  EXPECT_EQ(t.id, "t");
  ASSERT_EQ(t.inputs.size(), 1u);
  EXPECT_EQ(t.inputs[0].type, dtype::float32);
  EXPECT_EQ(resolve_shape(t.inputs[0], t.shapes[1]), (std::vector<std::int64_t>{3, 5}));
  EXPECT_DOUBLE_EQ(eval_dim_expr(t.min_bytes, t.shapes[0].dims), 256.0); // 8 * 4 * 8
  EXPECT_DOUBLE_EQ(t.tolerance.at(dtype::float32).atol, 0.0);
}

TEST(task_catalog, bad_files_name_the_file_and_the_field) {
  const std::string f = write_task("").string();
  // A missing field.
  auto e = error_of(replaced(good, R"("op": "relu", )", ""));
  EXPECT_NE(e.find(f), std::string::npos) << e;
  EXPECT_NE(e.find("op"), std::string::npos) << e;
  // A dtype that does not exist.
  e = error_of(replaced(good, R"("dtype": "float32", "role")", R"("dtype": "float8", "role")"));
  EXPECT_NE(e.find("/inputs/0/dtype"), std::string::npos) << e;
  // A shape that does not define a symbol the tensors use (a shape mismatch).
  e = error_of(replaced(good, R"({"R": 3, "C": 5})", R"({"R": 3, "K": 5})"));
  EXPECT_NE(e.find("/shapes/1"), std::string::npos) << e;
  EXPECT_NE(e.find("'C'"), std::string::npos) << e;
  // No odd dimension anywhere: no shape crosses a tile tail.
  e = error_of(replaced(good, R"({"R": 3, "C": 5})", R"({"R": 2, "C": 6})"));
  EXPECT_NE(e.find("/shapes"), std::string::npos) << e;
  // No tolerance for the output dtype.
  e = error_of(replaced(good, R"("tolerance": {"float32")", R"("tolerance": {"float16")"));
  EXPECT_NE(e.find("/tolerance"), std::string::npos) << e;
  // The id must be the file name.
  e = error_of(replaced(good, R"("id": "t")", R"("id": "u")"));
  EXPECT_NE(e.find("/id"), std::string::npos) << e;
  // Malformed JSON and an unknown expression symbol.
  EXPECT_NE(error_of("{").find("malformed JSON"), std::string::npos);
  e = error_of(replaced(good, R"("flops": "R*C")", R"("flops": "R*Q")"));
  EXPECT_NE(e.find("/flops"), std::string::npos) << e;
}

TEST(task_catalog, expressions_follow_arithmetic_precedence) {
  const std::map<std::string, std::int64_t> d = {{"M", 3}, {"N", 5}, {"K", 7}};
  EXPECT_DOUBLE_EQ(eval_dim_expr("2*M*N*K", d), 210.0);
  EXPECT_DOUBLE_EQ(eval_dim_expr("2*(M*K + K*N + M*N)", d), 2.0 * (21 + 35 + 15));
  EXPECT_DOUBLE_EQ(eval_dim_expr("M - N - K", d), -9.0); // left associative
  EXPECT_DOUBLE_EQ(eval_dim_expr("K / 2 * 4", d), 14.0);
  EXPECT_THROW(eval_dim_expr("M +", d), std::invalid_argument);
  EXPECT_THROW(eval_dim_expr("M / (N - 5)", d), std::invalid_argument);
  EXPECT_THROW(eval_dim_expr("M N", d), std::invalid_argument);
}

TEST(task_catalog, inputs_are_drawn_by_role_and_never_the_identity) {
  const auto t = load_task(std::string(KG_SOURCE_DIR) + "/data/tasks/rmsnorm_weight.json");
  const auto in = make_task_inputs(t, t.shapes[1], 42);
  ASSERT_EQ(in.size(), 2u);
  EXPECT_EQ(in[0].shape, (std::vector<std::int64_t>{33, 1531}));
  int ones = 0;
  double neg = 0;
  for (std::int64_t k = 0; k < in[1].numel(); ++k)
    ones += in[1].at(k) == 1.0 ? 1 : 0;
  for (std::int64_t k = 0; k < in[0].numel(); ++k)
    neg += in[0].at(k) < 0 ? 1 : 0;
  EXPECT_LT(ones, in[1].numel() / 10); // a weight of ones would hide a kernel that ignores it
  EXPECT_GT(neg / static_cast<double>(in[0].numel()), 0.4); // signed activations
  // Same seed, same bytes; another seed, other bytes.
  EXPECT_EQ(make_task_inputs(t, t.shapes[1], 42)[0].bytes, in[0].bytes);
  EXPECT_NE(make_task_inputs(t, t.shapes[1], 43)[0].bytes, in[0].bytes);
}

TEST(task_catalog, peer_input_regimes_model_the_peers_generators) {
  const auto t = load_task(std::string(KG_SOURCE_DIR) + "/data/tasks/layernorm_affine_fp32.json");
  task_input_regime kb;
  kb.uniform01_activations = true; // KernelBench: torch.rand
  kb.identity_params = true;       // default module init: weight 1, bias 0
  const auto in = make_task_inputs(t, t.shapes[1], 3, kb);
  for (std::int64_t k = 0; k < in[0].numel(); ++k) {
    ASSERT_GE(in[0].at(k), 0.0);
    ASSERT_LT(in[0].at(k), 1.0);
  }
  for (std::int64_t k = 0; k < in[1].numel(); ++k) {
    ASSERT_EQ(in[1].at(k), 1.0);
    ASSERT_EQ(in[2].at(k), 0.0);
  }
  task_input_regime neg;
  neg.scale = -1.0; // KernelBench-Verified's x(-1) hidden input
  const auto a = make_task_inputs(t, t.shapes[1], 3), b = make_task_inputs(t, t.shapes[1], 3, neg);
  for (std::int64_t k = 0; k < 100; ++k)
    EXPECT_EQ(b[0].at(k), -a[0].at(k));
  EXPECT_EQ(b[1].bytes, a[1].bytes); // parameters are not scaled
}

// The cache's pool: resident bytes are the trial's data and files, counted from the trial
// computed independently, and back to zero once forgotten; a cache destroyed with trials still
// queued returns at once and leaves no file behind.
TEST(trial_cache, resident_bytes_follow_the_trials_and_queued_ones_are_dropped) {
  const auto t = load_task(std::string(KG_SOURCE_DIR) + "/data/tasks/softmax_lastdim.json");
  const auto dir = std::filesystem::temp_directory_path() / "kg-test-trial-pool";
  remove_tree(dir);
  {
    trial_cache cache(dir, 1);
    const trial_key k{&t, &t.shapes[0], 9, {}, false};
    EXPECT_EQ(cache.resident_bytes(), 0u);
    (void)cache.files(k); // data, then files
    const auto d = compute_trial(k);
    std::size_t want = 0;
    for (const auto& x : d.inputs)
      want += 2 * x.bytes.size(); // held, and written
    for (const auto& x : d.oracle)
      want += x.bytes.size() + x.numel() * 4; // held in fp64, written as float32
    EXPECT_EQ(cache.resident_bytes(), want);
    cache.forget({k});
    EXPECT_EQ(cache.resident_bytes(), 0u);
    // A queue longer than one thread gets through before the destructor runs.
    for (std::uint64_t seed = 100; seed < 140; ++seed)
      cache.prefetch({&t, &t.shapes[0], seed, {}, false});
  }
  EXPECT_FALSE(std::filesystem::exists(dir) && !std::filesystem::is_empty(dir));
  remove_tree(dir);
}

// Trials prepared ahead on other cores are the trials computed inline, byte for byte; their
// files hold the same bytes; forgetting a trial removes its files.
TEST(trial_cache, prefetched_trials_equal_inline_ones) {
  const auto t = load_task(std::string(KG_SOURCE_DIR) + "/data/tasks/softmax_lastdim.json");
  const trial_key k{&t, &t.shapes[1], 5, {}, true};
  const trial_key other{&t, &t.shapes[1], 6, {}, false};
  const auto dir = std::filesystem::temp_directory_path() / "kg-test-trial-cache";
  remove_tree(dir);
  // The cache is gone (its prefetch threads joined, their folders removed) before the folder is.
  auto cache_holder = std::make_unique<trial_cache>(dir);
  trial_cache& cache = *cache_holder;
  cache.prefetch(k);
  cache.prefetch(k); // idempotent
  cache.prefetch(other);
  const auto a = cache.take(k);
  const auto b = compute_trial(k);
  ASSERT_EQ(a->inputs.size(), 1u);
  EXPECT_EQ(a->inputs[0].bytes, b.inputs[0].bytes);
  EXPECT_EQ(a->oracle[0].bytes, b.oracle[0].bytes);
  EXPECT_TRUE(a->reference_ran);
  ASSERT_EQ(a->reference.size(), 1u);
  EXPECT_EQ(a->reference[0].bytes, b.reference[0].bytes);
  EXPECT_NE(a->inputs[0].bytes, compute_trial(other).inputs[0].bytes); // another seed
  EXPECT_EQ(cache.take(k).get(), a.get()); // shared by the next candidate, not recomputed
  const auto f = cache.files(k);
  ASSERT_EQ(f.inputs.size(), 1u);
  ASSERT_EQ(f.expected.size(), 1u);
  std::ifstream in(f.inputs[0], std::ios::binary);
  const std::vector<char> bytes{std::istreambuf_iterator<char>(in), {}};
  ASSERT_EQ(bytes.size(), b.inputs[0].bytes.size());
  EXPECT_EQ(std::memcmp(bytes.data(), b.inputs[0].bytes.data(), bytes.size()), 0);
  EXPECT_EQ(std::filesystem::file_size(f.expected[0]),
            static_cast<std::uintmax_t>(b.oracle[0].numel()) * 4); // float32
  EXPECT_EQ(cache.files(k).inputs[0], f.inputs[0]);                // written once
  cache.forget({k, other});
  EXPECT_FALSE(std::filesystem::exists(f.inputs[0]));
  // Forgotten: a second take computes afresh (and still agrees).
  EXPECT_EQ(cache.take(k)->oracle[0].bytes, b.oracle[0].bytes);
  cache_holder.reset();
  remove_tree(dir);
}
