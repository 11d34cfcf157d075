// Bad input gets a one-line error naming the problem and a documented exit code, and never
// leaves a result.json that looks complete.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "reports/remove_tree.h"
#include "suite/cli.h"
#include "suite/exit_codes.h"
#include "gpu/device_info.h"
#include "gpu/green_partition.h"
#include "timing/interrupt.h"

using namespace kg;
namespace fs = std::filesystem;

namespace {
using test::run;
using test::run_result;
fs::path temp(const std::string& name) {
  auto p = fs::temp_directory_path() / ("kg_cli_" + name + "_" + std::to_string(getpid()));
  kg::remove_tree(p);
  return p;
}
using test::lines;
} // namespace

TEST(cli, unknown_audit_is_a_one_line_error_with_exit_2) {
  const auto out = temp("unknown_audit");
  const auto r = run({"audit", "rmsnorm-bias", "--out", out.string()});
  EXPECT_EQ(r.rc, exit_code::bad_input);
  EXPECT_NE(r.err.find("unknown audit 'rmsnorm-bias'"), std::string::npos) << r.err;
  EXPECT_EQ(lines(r.err), 1);
  EXPECT_FALSE(fs::exists(out / "result.json"));
}

TEST(cli, unknown_protocol_is_a_one_line_error_with_exit_2) {
  const auto out = temp("unknown_protocol");
  const auto r = run({"audit", "layernorm-affine", "--protocol", "lenient", "--out", out.string()});
  EXPECT_EQ(r.rc, exit_code::bad_input);
  EXPECT_NE(r.err.find("unknown protocol 'lenient'"), std::string::npos) << r.err;
  EXPECT_EQ(lines(r.err), 1);
  EXPECT_FALSE(fs::exists(out / "result.json"));
}

TEST(cli, unwritable_output_is_a_one_line_error_with_exit_2) {
  const auto base = temp("unwritable");
  fs::create_directories(base);
  std::ofstream(base / "a_file") << "not a folder";
  const auto out = base / "a_file" / "out";
  const auto r = run({"audit", "layernorm-affine", "--out", out.string()});
  EXPECT_EQ(r.rc, exit_code::bad_input);
  EXPECT_NE(r.err.find(out.string()), std::string::npos) << r.err;
  EXPECT_EQ(lines(r.err), 1);
  EXPECT_FALSE(fs::exists(out / "result.json"));
  kg::remove_tree(base);
}

TEST(cli, unknown_command_option_and_missing_value) {
  EXPECT_EQ(run({"frobnicate"}).rc, exit_code::bad_input);
  EXPECT_EQ(run({"audit", "layernorm-affine", "--fast"}).rc, exit_code::bad_input);
  EXPECT_EQ(run({"audit", "layernorm-affine", "--out"}).rc, exit_code::bad_input);
  EXPECT_EQ(run({"audit", "layernorm-affine", "--backend", "tpu"}).rc, exit_code::bad_input);
  EXPECT_EQ(run({}).rc, exit_code::bad_input);
  EXPECT_EQ(run({"help"}).rc, exit_code::ok);
}

TEST(cli, env_json_parses_and_names_every_section) {
  const auto r = run({"env", "--json"});
  ASSERT_EQ(r.rc, exit_code::ok) << r.err;
  const auto env = nlohmann::json::parse(r.out);
  for (const auto& k : {"gpu", "driver", "clocks", "build", "git", "cpu", "os", "nvml"})
    EXPECT_TRUE(env.contains(k)) << k;
}

TEST(cli, validate_reports_missing_malformed_and_nonconforming_files) {
  const auto dir = temp("validate");
  fs::create_directories(dir);
  EXPECT_EQ(run({"validate", (dir / "absent.json").string()}).rc, exit_code::bad_input);
  std::ofstream(dir / "bad.json") << "{\"schema\": ";
  const auto malformed = run({"validate", (dir / "bad.json").string()});
  EXPECT_EQ(malformed.rc, exit_code::bad_input);
  EXPECT_NE(malformed.err.find("malformed JSON"), std::string::npos);
  std::ofstream(dir / "wrong.json") << R"({"schema": "kernelgate.result/0", "kind": "audit"})";
  const auto wrong = run({"validate", (dir / "wrong.json").string()});
  EXPECT_EQ(wrong.rc, exit_code::failures);
  EXPECT_NE(wrong.err.find("/schema"), std::string::npos) << wrong.err;
  kg::remove_tree(dir);
}

TEST(cli, cuda_backend_without_a_gpu_exits_3) {
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0)
    GTEST_SKIP() << "a CUDA device is present; the no-GPU path is exercised on CPU machines";
  const auto out = temp("nogpu");
  const auto r = run({"audit", "layernorm-affine", "--backend", "cuda", "--out", out.string()});
  EXPECT_EQ(r.rc, exit_code::unavailable);
  EXPECT_NE(r.err.find("backend 'cuda' unavailable"), std::string::npos) << r.err;
  EXPECT_EQ(lines(r.err), 1);
  EXPECT_FALSE(fs::exists(out / "result.json"));
}

TEST(cli, an_interrupted_audit_keeps_its_records_and_reports_the_rest_missing) {
  // The stop flag is what SIGINT/SIGTERM set; raising it first means nothing gets measured.
  const auto out = temp("interrupted");
  kg::request_stop();
  const auto r = run({"audit", "layernorm-affine", "--out", out.string()});
  kg::clear_stop();
  EXPECT_EQ(r.rc, exit_code::interrupted);
  EXPECT_NE(r.err.find("interrupted"), std::string::npos);
  std::ifstream f(out / "result.json");
  const auto doc = nlohmann::json::parse(f);
  EXPECT_EQ(doc["summary"]["status"], "interrupted");
  EXPECT_EQ(doc["summary"]["totals"]["missing"], 504); // unknown, not rejected
  EXPECT_EQ(doc["summary"]["totals"]["rejected"], 0);
  kg::remove_tree(out);
}

TEST(cli, time_rejects_unknown_implementations_and_bad_options) {
  auto r = run({"time", "--impl", "layernorm-fast"});
  EXPECT_EQ(r.rc, exit_code::bad_input);
  EXPECT_NE(r.err.find("unknown implementation 'layernorm-fast'"), std::string::npos) << r.err;
  EXPECT_EQ(lines(r.err), 1);
  r = run({"time", "--impl", "layernorm", "--vs", "nope"});
  EXPECT_EQ(r.rc, exit_code::bad_input);
  r = run({"time", "--impl", "layernorm", "--clocks", "lock=fast"});
  EXPECT_EQ(r.rc, exit_code::bad_input);
  EXPECT_NE(r.err.find("--clocks"), std::string::npos);
  r = run({"time", "--impl", "layernorm", "--shape", "8192"});
  EXPECT_EQ(r.rc, exit_code::bad_input);
  r = run({"time", "--impl", "layernorm", "--dtype", "int8"});
  EXPECT_EQ(r.rc, exit_code::bad_input);
}

TEST(cli, time_without_a_gpu_exits_3) {
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0)
    GTEST_SKIP() << "a CUDA device is present; the no-GPU path is exercised on CPU machines";
  const auto out = temp("time_nogpu");
  const auto r = run({"time", "--impl", "layernorm", "--out", out.string()});
  EXPECT_EQ(r.rc, exit_code::unavailable);
  EXPECT_NE(r.err.find("no GPU"), std::string::npos) << r.err;
  EXPECT_EQ(lines(r.err), 1);
  EXPECT_FALSE(fs::exists(out / "result.json"));
}

// eval's bad input: each a one-line error naming the problem, exit 2; no GPU, exit 3.
TEST(cli, eval_bad_input_names_the_file_and_field) {
  const std::string tasks = std::string(KG_SOURCE_DIR) + "/data/tasks",
                    kernels = std::string(KG_SOURCE_DIR) + "/kernels/tasks";
  auto r = run({"eval", "--tasks", tasks});
  EXPECT_EQ(r.rc, exit_code::bad_input);
  EXPECT_NE(r.err.find("--candidates"), std::string::npos) << r.err;
  r = run({"eval", "--tasks", "/nonexistent/*.json", "--candidates", kernels});
  EXPECT_EQ(r.rc, exit_code::bad_input);
  EXPECT_NE(r.err.find("no task files match"), std::string::npos) << r.err;
  r = run({"eval", "--tasks", tasks, "--candidates", kernels, "--protocol", "lenient"});
  EXPECT_EQ(r.rc, exit_code::bad_input);
  EXPECT_NE(r.err.find("unknown protocol 'lenient' (known: strict, kernelbench"), std::string::npos)
      << r.err;
  r = run({"eval", "--tasks", tasks, "--candidates", kernels, "--trials", "0"});
  EXPECT_EQ(r.rc, exit_code::bad_input);
  r = run({"eval", "--tasks", tasks, "--candidates", "/nonexistent-dir"});
  EXPECT_EQ(r.rc, exit_code::bad_input);
  EXPECT_NE(r.err.find("not a folder"), std::string::npos) << r.err;
  // A task file with a bad dtype: the message names the file and the field.
  const auto dir = std::filesystem::temp_directory_path() / "kg-cli-eval-bad";
  std::filesystem::create_directories(dir);
  {
    std::ifstream in(tasks + "/relu.json");
    std::string s((std::istreambuf_iterator<char>(in)), {});
    s.replace(s.find("\"float32\""), 9, "\"float8\"");
    std::ofstream(dir / "relu.json") << s;
  }
  r = run({"eval", "--tasks", (dir / "relu.json").string(), "--candidates", kernels});
  EXPECT_EQ(r.rc, exit_code::bad_input);
  EXPECT_NE(r.err.find("relu.json: /inputs/0/dtype"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err; // one line
  kg::remove_tree(dir);
}

TEST(cli, eval_without_a_gpu_exits_3) {
  if (query_device(0).available) GTEST_SKIP() << "a GPU is present";
  const auto r = run({"eval", "--tasks", std::string(KG_SOURCE_DIR) + "/data/tasks", "--candidates",
                      std::string(KG_SOURCE_DIR) + "/kernels/tasks"});
  EXPECT_EQ(r.rc, exit_code::unavailable);
  EXPECT_NE(r.err.find("no GPU"), std::string::npos) << r.err;
}

// `workload`: the list names every workload; the small LoRA run passes its gates against the fp64
// reference and writes a valid result; a GPU-only workload without a GPU exits 3; bad input 2.
TEST(cli, workload_run_gates_against_the_reference_and_writes_a_valid_result) {
  auto r = run({"workload", "list"});
  EXPECT_EQ(r.rc, exit_code::ok);
  EXPECT_NE(r.out.find("lora-train-small"), std::string::npos);
  EXPECT_NE(r.out.find("lora-train-qwen3-4b"), std::string::npos);
  EXPECT_NE(r.out.find("decode-qwen3-4b"), std::string::npos);
  {
    // Its own line, marked GPU-only, its id set apart from the description.
    const auto at = r.out.find("\ndecode-colocated-training ");
    ASSERT_NE(at, std::string::npos) << r.out;
    const auto line = r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
    EXPECT_NE(line.find(" [GPU] "), std::string::npos) << line;
  }
  const auto out = std::filesystem::temp_directory_path() / "kg-cli-workload";
  kg::remove_tree(out);
  r = run({"workload", "run", "lora-train-small", "--steps", "3", "--out", out.string()});
  EXPECT_EQ(r.rc, exit_code::ok) << r.err << r.out;
  // The header, step seconds, tokens/s, SOL fraction, the other metric (the losses of 3 steps x
  // 2 jobs), three gates, the path.
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 9) << r.out;
  const auto losses = r.out.find("  losses_by_step: [[");
  ASSERT_NE(losses, std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin() + static_cast<long>(losses),
                       r.out.begin() + static_cast<long>(r.out.find('\n', losses)), '['),
            4)
      << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  const auto v = run({"validate", (out / "result.json").string()});
  EXPECT_EQ(v.rc, exit_code::ok) << v.out << v.err;
  std::ifstream in(out / "result.json");
  const auto j = nlohmann::json::parse(in);
  ASSERT_EQ(j.at("records").size(), 1u);
  const auto& rec = j["records"][0];
  EXPECT_EQ(rec.at("gates").size(), 3u);
  EXPECT_EQ(rec.at("metrics").at("losses_by_step").size(), 3u); // one row per step
  const auto& ci = rec.at("metrics").at("step_seconds").at("ci95");
  EXPECT_LE(ci[0].get<double>(), rec["metrics"]["step_seconds"]["estimate"].get<double>());
  r = run({"workload", "run", "no-such-workload"});
  EXPECT_EQ(r.rc, exit_code::bad_input);
  EXPECT_EQ(lines(r.err), 1);
  r = run({"workload", "run", "lora-train-small", "--steps", "1"});
  EXPECT_EQ(r.rc, exit_code::bad_input);
  if (!query_device(0).available) {
    r = run({"workload", "run", "lora-train-qwen3-4b"});
    EXPECT_EQ(r.rc, exit_code::unavailable);
    EXPECT_NE(r.err.find("needs a GPU"), std::string::npos) << r.err;
    r = run({"workload", "run", "decode-qwen3-4b"});
    EXPECT_EQ(r.rc, exit_code::unavailable);
    EXPECT_NE(r.err.find("needs a GPU"), std::string::npos) << r.err;
    // Valid options, no GPU: one line, exit 3, before any LibTorch or green-context work.
    r = run({"workload", "run", "decode-colocated-training", "--repeats", "3", "--max-load-steps",
             "4", "--itl-limit-ms", "40", "--trace-seconds", "2.5"});
    EXPECT_EQ(r.rc, exit_code::unavailable);
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("decode-colocated-training needs a GPU"), std::string::npos) << r.err;
  }
  r = run({"workload", "run", "decode-qwen3-4b", "--start-rps", "fast"});
  EXPECT_EQ(r.rc, exit_code::bad_input) << r.err;
  // The co-located workload's options are checked before the GPU is looked for.
  for (const std::vector<std::string>& bad : {std::vector<std::string>{"--repeats", "1"},
                                              {"--repeats", "101"},
                                              {"--repeats", "2.5"},
                                              {"--max-load-steps", "0"},
                                              {"--itl-limit-ms", "0"},
                                              {"--itl-limit-ms", "nan"},
                                              {"--trace-seconds", "-1"}}) {
    std::vector<std::string> a = {"workload", "run", "decode-colocated-training"};
    a.insert(a.end(), bad.begin(), bad.end());
    r = run(a);
    EXPECT_EQ(r.rc, exit_code::bad_input) << bad[0] << " " << bad[1] << ": " << r.err;
    EXPECT_EQ(lines(r.err), 1) << r.err;
  }
  kg::remove_tree(out);
}

// Green contexts without a GPU (or a driver without them): a reason, never a crash.
TEST(green_partition, without_a_gpu_there_is_a_reason_not_a_partition) {
  if (query_device(0).available) GTEST_SKIP() << "a GPU is present (gpu_green_partition covers it)";
  std::string why;
  const auto p = green_partition::create(0, 33, &why);
  EXPECT_FALSE(p.has_value());
  EXPECT_FALSE(why.empty());
}
