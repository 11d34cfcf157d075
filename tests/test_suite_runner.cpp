// The suite runner's loop without a GPU: records built from fake measurements, an executor's
// failure recorded as an error without stopping the run, an interruption leaving the workload in
// flight unrecorded, and --resume's bookkeeping (a killed run resumed ends with the same ids as
// an uninterrupted one, none twice).
#include <algorithm>
#include <sstream>
#include <unistd.h>

#include <gtest/gtest.h>

#include "reports/remove_tree.h"
#include "reports/result_writer.h"
#include "suite/suite_runner.h"
#include "timing/interrupt.h"

using namespace kg;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  const auto d = fs::temp_directory_path() / ("kg_runner_" + name + "_" + std::to_string(getpid()));
  kg::remove_tree(d);
  return d;
}

suite_workload workload(const std::string& id, const std::string& setup, double cost = 1.0) {
  suite_workload w;
  w.id = id;
  w.level = "kernel";
  w.kind = "gemv";
  w.setup = setup;
  w.metric = {"kernel_seconds", "lower", "s"};
  w.cost_seconds = cost;
  w.roles = {{"gemv.qkv", "kernelgate.gemv_bf16"}};
  return w;
}

std::vector<suite_workload> six() {
  return order_for_run({workload("k.a", "kernels"), workload("k.b", "kernels"),
                        workload("s.a", "engine.whole"), workload("s.b", "engine.whole"),
                        workload("t.a", "training.whole"), workload("t.b", "training.whole")});
}

// Each workload's samples: its index + 1 microseconds, 5 of them with a small spread.
measured_workload fake_measure(const suite_workload& w) {
  measured_workload m;
  const double base = (w.id[0] == 'k' ? 1 : w.id[0] == 's' ? 2 : 3) * 1e-6;
  for (int i = 0; i < 5; ++i)
    m.samples.push_back(base * (1.0 + 0.001 * i));
  m.sol_bound = base / 2;
  m.gates.push_back({"oracle_fp64", true, "fine"});
  return m;
}

nlohmann::json no_roles(const suite_workload&) {
  return nlohmann::json::object();
}

std::vector<std::string> ids_of(const std::vector<nlohmann::json>& records) {
  std::vector<std::string> out;
  for (const auto& r : records)
    out.push_back(r["id"]);
  return out;
}

} // namespace

TEST(suite_runner, a_record_holds_samples_median_interval_sol_and_gates) {
  const auto w = workload("k.a", "kernels");
  measured_workload m;
  m.samples = {4e-6, 2e-6, 3e-6};
  m.sol_bound = 1.5e-6;
  m.gates = {{"oracle_fp64", true, "ok"}};
  const auto r = make_suite_record(w, m, {{"gemv.qkv", {{"implementation", "x"}}}}, 0.5);
  EXPECT_EQ(r["type"], "suite_workload");
  EXPECT_EQ(r["samples"].size(), 3u);
  EXPECT_DOUBLE_EQ(r["estimate"].get<double>(), 3e-6); // the median
  EXPECT_LE(r["ci95"][0].get<double>(), 3e-6);
  EXPECT_GE(r["ci95"][1].get<double>(), 3e-6);
  EXPECT_DOUBLE_EQ(r["sol"]["fraction"].get<double>(), 0.5); // bound / median
  EXPECT_TRUE(record_gates_pass(r));
  // A rate: measured over bound.
  auto rate = w;
  rate.metric = {"tokens_per_second", "higher", "tokens/s"};
  m.samples = {100, 100};
  m.sol_bound = 400;
  EXPECT_DOUBLE_EQ(make_suite_record(rate, m, {}, 0)["sol"]["fraction"].get<double>(), 0.25);
  // No samples is not a record; an error record fails its gate.
  m.samples.clear();
  EXPECT_THROW(make_suite_record(w, m, {}, 0), std::invalid_argument);
  const auto e = make_error_record(w, "out of memory", {}, 0.1);
  EXPECT_FALSE(record_gates_pass(e));
  EXPECT_EQ(e["gates"][0]["name"], "measured");
}

TEST(suite_runner, an_executor_error_is_recorded_and_the_run_goes_on) {
  const auto dir = fresh_dir("error");
  const auto w = six();
  std::ostringstream out;
  suite_progress p(out, false, w);
  result_writer writer(dir, "suite_run", {}, {}, {});
  const auto r = run_suite_loop(
      w, {},
      [](const suite_workload& x) {
        if (x.id == "s.a") throw std::runtime_error("cudaErrorMemoryAllocation");
        return fake_measure(x);
      },
      no_roles, writer, p);
  EXPECT_EQ(r.measured, 6);
  EXPECT_EQ(r.errors, 1);
  EXPECT_EQ(r.gates_failed, 1);
  ASSERT_EQ(writer.records().size(), 6u);
  EXPECT_EQ(writer.records()[2]["error"], "cudaErrorMemoryAllocation");
  // One line per workload, each with the median and the interval, or the error.
  const auto text = out.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 6);
  EXPECT_NE(text.find("ERROR cudaErrorMemoryAllocation"), std::string::npos);
  EXPECT_NE(text.find("[95% "), std::string::npos);
  EXPECT_NE(text.find("SOL 49.9%"), std::string::npos); // bound base / 2 over median 1.002 base
  kg::remove_tree(dir);
}

TEST(suite_runner, a_killed_run_resumed_ends_with_every_id_once) {
  const auto w = six();
  // Uninterrupted.
  const auto whole_dir = fresh_dir("whole");
  std::vector<std::string> whole_ids;
  {
    std::ostringstream out;
    suite_progress p(out, false, w);
    result_writer writer(whole_dir, "suite_run", {}, {}, {});
    run_suite_loop(w, {}, fake_measure, no_roles, writer, p);
    whole_ids = ids_of(writer.records());
  }
  // Interrupted in the fourth workload (nothing recorded for it), and the third record's line
  // torn as a SIGKILL in its write would leave it.
  const auto dir = fresh_dir("killed");
  {
    std::ostringstream out;
    suite_progress p(out, false, w);
    result_writer writer(dir, "suite_run", {}, {}, {});
    int calls = 0;
    const auto r = run_suite_loop(
        w, {},
        [&](const suite_workload& x) {
          if (++calls == 4) throw interrupted_error();
          return fake_measure(x);
        },
        no_roles, writer, p);
    EXPECT_TRUE(r.interrupted);
    EXPECT_EQ(writer.records().size(), 3u);
  }
  {
    // Tear the last line: cut the file inside the third record.
    const auto file = dir / "records.jsonl";
    const auto size = fs::file_size(file);
    fs::resize_file(file, size - 10);
  }
  int torn = 0;
  result_writer writer(result_writer::resume_tag{}, dir, "suite_run", {}, {}, {}, &torn);
  EXPECT_EQ(torn, 1);
  const auto done = finished_ids(writer.records());
  EXPECT_EQ(done.size(), 2u);
  std::ostringstream out;
  suite_progress p(out, false, w);
  std::vector<std::string> ran;
  const auto r = run_suite_loop(
      w, done,
      [&](const suite_workload& x) {
        ran.push_back(x.id);
        return fake_measure(x);
      },
      no_roles, writer, p);
  EXPECT_EQ(r.skipped, 2);
  EXPECT_EQ(ran.size(), 4u); // the torn one, the one in flight and the two never started
  auto ids = ids_of(writer.records());
  EXPECT_EQ(ids, whole_ids); // the same ids, in run order, none twice
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end());
  kg::remove_tree(dir);
  kg::remove_tree(whole_dir);
}

TEST(suite_runner, the_eta_scales_the_remaining_cost_by_measured_over_estimated) {
  std::vector<suite_workload> w = {workload("a", "kernels", 2.0), workload("b", "kernels", 6.0)};
  std::ostringstream out;
  suite_progress p(out, false, w);
  EXPECT_DOUBLE_EQ(p.eta_seconds(), 8.0); // nothing measured yet: the estimates
  measured_workload m = fake_measure(w[0]);
  p.end(w[0], make_suite_record(w[0], m, {}, 4.0), 4.0); // took twice its estimate
  EXPECT_DOUBLE_EQ(p.eta_seconds(), 12.0);               // 6 s left, x2
}
