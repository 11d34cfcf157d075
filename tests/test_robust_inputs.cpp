// Malformed and adversarial inputs, one regression test per cause found by the malformed-input
// campaign: each gives one line naming the problem and a documented exit code, never a crash.
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "reports/json_input.h"
#include "reports/json_schema.h"
#include "reports/remove_tree.h"
#include "reports/result_writer.h"
#include "suite/exit_codes.h"
#include "suite/task_catalog.h"
#include "timing/interrupt.h"
#include "workloads/task.h"

using namespace kg;
using kg::test::lines;
using kg::test::run;
namespace fs = std::filesystem;

namespace {
struct scratch {
  fs::path dir = fs::temp_directory_path() / ("kg-robust-" + std::to_string(::getpid()));
  scratch() {
    remove_tree(dir);
    fs::create_directories(dir);
  }
  ~scratch() { remove_tree(dir); }
  std::string write(const std::string& name, const std::string& text) const {
    fs::create_directories((dir / name).parent_path());
    std::ofstream(dir / name, std::ios::binary) << text;
    return (dir / name).string();
  }
};

// A one-line error with the given exit code.
void expect_clean(const kg::test::run_result& r, int code) {
  EXPECT_EQ(r.rc, code) << r.err;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_EQ(r.err.rfind("kernelgate: ", 0), 0u) << r.err;
}

std::string task_json(const std::string& dims_c, const std::string& flops = "R*C",
                      const std::string& upper = "") {
  const std::string idx =
      upper.empty() ? ""
                    : R"(, {"name": "i", "dtype": "int64", "role": "indices", "upper": ")" + upper +
                          R"(", "shape": ["R"]})";
  return R"({"id": "t", "title": "t", "kind": "single", "op": "relu", "reference": "r",
    "inputs": [{"name": "x", "dtype": "float32", "shape": ["R", "C"]})" +
         idx + R"(],
    "outputs": [{"name": "y", "dtype": "float32", "shape": ["R", "C"]}],
    "shapes": [{"name": "a", "dims": {"R": 3, "C": )" +
         dims_c + R"(}}, {"name": "b", "dims": {"R": 5, "C": 7}}],
    "flops": ")" +
         flops +
         R"(", "min_bytes": "8*R*C", "tolerance": {"float32": {"atol": 0, "rtol": 0}},
    "library_calls": "forbidden"})";
}
} // namespace

// 1. A number outside the double range.
TEST(robust_inputs, a_number_past_the_double_range_is_bad_input) {
  scratch s;
  expect_clean(run({"validate", s.write("n.json", R"({"x":1e400})")}), exit_code::bad_input);
}

// 2. Patterns over long strings: no stack overflow in std::regex.
TEST(robust_inputs, a_pattern_is_checked_on_a_long_string_without_overflowing_the_stack) {
  const auto schema = nlohmann::json::parse(R"({"pattern": "^(cupti|unavailable: .*)$"})");
  EXPECT_TRUE(validate_json(schema, "unavailable: " + std::string(100000, 'x')).empty());
  EXPECT_FALSE(validate_json(schema, "nope" + std::string(100000, 'x')).empty());
  const auto beyond = validate_json(schema, "unavailable: " + std::string(1 << 19, 'x'));
  ASSERT_EQ(beyond.size(), 1u);
  EXPECT_NE(beyond[0].message.find("longer than"), std::string::npos);
}

// 3. Deep nesting: refused before any recursive walk.
TEST(robust_inputs, deep_nesting_is_refused_in_one_line) {
  scratch s;
  const std::string deep =
      "{\"schema\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  expect_clean(run({"validate", s.write("d.json", deep)}), exit_code::bad_input);
  expect_clean(run({"fastp", s.write("e.json", deep)}), exit_code::bad_input);
  EXPECT_NO_THROW(parse_json_text(std::string(256, '[') + std::string(256, ']'), "ok"));
}

// 4. The expression parser holds no recursion an input can deepen.
TEST(robust_inputs, the_expression_parser_survives_deep_input_and_keeps_precedence) {
  const std::map<std::string, std::int64_t> dims = {{"R", 3}, {"C", 4}};
  EXPECT_EQ(eval_dim_expr("2+R*C", dims), 14);
  EXPECT_EQ(eval_dim_expr("(2+R)*C", dims), 20);
  EXPECT_EQ(eval_dim_expr("-(-2)*3 - C/2", dims), 4);
  EXPECT_EQ(eval_dim_expr("8-2-1", dims), 5);
  EXPECT_EQ(eval_dim_expr("1e3/4", dims), 250);
  EXPECT_EQ(eval_dim_expr(std::string(100000, '(') + "1" + std::string(100000, ')'), dims), 1);
  for (const std::string e : {std::string(100001, '-') + "1", std::string(100000, '(') + "1"})
    EXPECT_THROW(eval_dim_expr(e, dims), std::invalid_argument);
  for (const std::string e : {"", "1+", "(1", "1)", "R C", "2**3", "1/0", "x"})
    EXPECT_THROW(eval_dim_expr(e, dims), std::invalid_argument) << e;
}

// 5. Out-of-range numbers in dimensions and expressions.
TEST(robust_inputs, out_of_range_numbers_are_errors_not_crashes) {
  const task_shape shape{"a", {{"R", 3}}};
  EXPECT_THROW(resolve_dim("99999999999999999999", shape), std::invalid_argument);
  EXPECT_THROW(resolve_dim("12abc", shape), std::invalid_argument);
  EXPECT_EQ(resolve_dim("12", shape), 12);
  EXPECT_THROW(eval_dim_expr("1e999", {}), std::invalid_argument);
  EXPECT_THROW(eval_dim_expr("1e308*1e308", {}), std::invalid_argument); // not finite
}

// 6. A folder where a JSON file is expected.
TEST(robust_inputs, a_folder_read_as_json_is_bad_input) {
  scratch s;
  expect_clean(run({"validate", s.dir.string()}), exit_code::bad_input);
  fs::create_directories(s.dir / "tasks/x.json");
  EXPECT_THROW(load_tasks((s.dir / "tasks").string()), task_error);
}

// 7. workload run stops at SIGINT/SIGTERM: exit 130, a result marked interrupted.
TEST(robust_inputs, an_interrupted_workload_exits_130_with_its_result) {
  scratch s;
  request_stop();
  const auto r =
      run({"workload", "run", "lora-train-small", "--steps", "3", "--out", (s.dir / "w").string()});
  clear_stop();
  EXPECT_EQ(r.rc, exit_code::interrupted) << r.err;
  std::ifstream f(s.dir / "w/result.json");
  ASSERT_TRUE(f);
  EXPECT_EQ(nlohmann::json::parse(f)["summary"]["status"], "interrupted");
  expect_clean(run({"workload", "run", "lora-train-small", "--steps", "100000000"}),
               exit_code::bad_input);
}

// 8. Records are whole lines; a torn last line is dropped by the reader and counted.
TEST(robust_inputs, records_are_whole_lines_and_a_torn_last_line_is_dropped) {
  scratch s;
  {
    result_writer w(s.dir / "r", "audit", {"kernelgate"}, nlohmann::json::object(),
                    nlohmann::json::object());
    w.append({{"big", std::string(1 << 20, 'a')}});
    w.append({{"n", 2}});
  }
  int torn = -1;
  EXPECT_EQ(read_records(s.dir / "r/records.jsonl", &torn).size(), 2u);
  EXPECT_EQ(torn, 0);
  std::ofstream(s.dir / "r/records.jsonl", std::ios::app) << R"({"n": 3, "cut)";
  const auto recs = read_records(s.dir / "r/records.jsonl", &torn);
  EXPECT_EQ(recs.size(), 2u);
  EXPECT_EQ(torn, 1);
}

// 9. A newline in a user string does not split the error line.
TEST(robust_inputs, user_strings_are_escaped_in_errors) {
  expect_clean(run({"fastp", "a\nb.json"}), exit_code::bad_input);
  expect_clean(run({"eval", "--tasks", "x", "--candidates", "y", "--protocol", "p\nq"}),
               exit_code::bad_input);
  EXPECT_EQ(printable("a\nb\t\x01"), "a\\nb\\t\\x01");
}

// 10. A stale result.json never survives a run that stopped early.
TEST(robust_inputs, a_stale_result_is_removed_even_when_the_run_stops_early) {
  scratch s;
  s.write("result.json", "{}");
  const auto r = run({"fastp", (s.dir / "missing.json").string(), "--out", s.dir.string()});
  EXPECT_EQ(r.rc, exit_code::bad_input);
  EXPECT_FALSE(fs::exists(s.dir / "result.json"));
}

// 11. Values that parse but make no sense.
TEST(robust_inputs, non_finite_and_wrapping_values_are_refused) {
  scratch s;
  for (const char* v : {"nan", "inf", "-1"})
    expect_clean(run({"eval", "--tasks", "x", "--candidates", "y", "--timeout", v}),
                 exit_code::bad_input);
  expect_clean(run({"eval", "--tasks", "x", "--candidates", "y", "--time-budget", "inf"}),
               exit_code::bad_input);
  expect_clean(run({"time", "--impl", "layernorm", "--min-effect", "nan"}), exit_code::bad_input);
  EXPECT_THROW(load_task(s.write("big/t.json", task_json("9223372036854775808"))), task_error);
  EXPECT_THROW(load_task(s.write("neg/t.json", task_json("-3"))), task_error);
  EXPECT_THROW(load_task(s.write("upper/t.json", task_json("9", "R*C", "12abc"))), task_error);
  EXPECT_THROW(load_task(s.write("inf/t.json", task_json("9", "1e308*1e308"))), task_error);
  EXPECT_NO_THROW(load_task(s.write("ok/t.json", task_json("9"))));
  const std::string sample =
      R"([{"sample_id": 0, "compiled": true, "correctness": true, "runtime": 1.0}])";
  const auto kb = s.write("eval_results.json", "{\"1\": " + sample + ", \"01\": " + sample + "}");
  const auto base = s.write("base.json", R"({"level1": {"1_P1.py": {"mean": 1.0}}})");
  expect_clean(run({"fastp", kb, "--baseline", base}), exit_code::bad_input);
  expect_clean(run({"workload", "run", "lora-train-small", "--repeats", "-7"}),
               exit_code::bad_input);
}

// 12. The internal worker subcommand.
TEST(robust_inputs, the_worker_subcommand_refuses_bad_arguments_in_one_line) {
  expect_clean(run({"worker", "--serve", "x", "y"}), exit_code::bad_input);
  expect_clean(run({"worker"}), exit_code::bad_input);
}
