// `kernelgate eval`'s pipeline without a GPU: KERNELGATE_FAKE_DEVICE=1 with a stand-in worker
// (tests/fake_worker.cpp: zeros for every output, a crash or a hang where the candidate's object
// carries a marker). What is checked is the parent's part -- real candidates compiled by nvcc,
// several worker threads, records in pair order, a crash and a hang contained, a task without a
// candidate MISSING -- which the GPU tests cover only on a GPU.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "reports/remove_tree.h"
#include "sandbox/sandbox.h"
#include "suite/cli.h"
#include "suite/exit_codes.h"
#include "suite/task_catalog.h"

using namespace kg;
namespace fs = std::filesystem;

TEST(eval_pipeline, pairs_run_on_a_worker_pool_and_are_recorded_in_order) {
  const fs::path d = fs::temp_directory_path() / ("kg-eval-pipeline-" + std::to_string(::getpid()));
  remove_tree(d);
  const fs::path src = KG_SOURCE_DIR;
  fs::create_directories(d / "tasks");
  fs::create_directories(d / "cands/softmax_lastdim");
  for (const char* t : {"softmax_lastdim.json", "sum_lastdim.json"})
    fs::copy_file(src / "data/tasks" / t, d / "tasks" / t);
  std::ifstream in(src / "kernels/tasks/softmax_lastdim.cu");
  std::stringstream kernel;
  kernel << in.rdbuf();
  // Markers the fake worker looks for in the shared object (kept by `used`).
  const std::map<std::string, std::string> cands = {
      {"a", ""},
      {"b", "// another copy\n"},
      {"crash", "__attribute__((used)) static const char marker[] = \"KG_FAKE_CRASH\";\n"},
      {"hang", "__attribute__((used)) static const char marker[] = \"KG_FAKE_HANG\";\n"},
      {"nowrite", "__attribute__((used)) static const char marker[] = \"KG_FAKE_NOWRITE\";\n"}};
  for (const auto& [name, extra] : cands)
    std::ofstream(d / "cands/softmax_lastdim" / (name + ".cu")) << extra << kernel.str();
  ::setenv("KERNELGATE_FAKE_DEVICE", "1", 1);
  ::setenv("KERNELGATE_WORKER", KG_FAKE_WORKER_BIN, 1);
  std::ostringstream out, err;
  const auto t0 = std::chrono::steady_clock::now();
  const int rc =
      kernelgate_main({"kernelgate", "eval", "--tasks", (d / "tasks").string(), "--candidates",
                       (d / "cands").string(), "--workers", "3", "--timeout", "3", "--cache",
                       (d / "cache").string(), "--out", (d / "out").string(), "--kernelbench",
                       (d / "kb/eval_results.json").string()},
                      out, err);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::unsetenv("KERNELGATE_FAKE_DEVICE");
  ::unsetenv("KERNELGATE_WORKER");
  EXPECT_EQ(rc, exit_code::failures) << err.str();
  std::ifstream r(d / "out/result.json");
  const auto j = nlohmann::json::parse(r);
  std::vector<std::string> ids, statuses;
  for (const auto& rec : j.at("records"))
    if (rec.at("type") == "evaluation") {
      ids.push_back(rec.at("id"));
      statuses.push_back(rec.at("status"));
    }
  const std::vector<std::string> want_ids = {
      "eval/softmax_lastdim/a",    "eval/softmax_lastdim/b",       "eval/softmax_lastdim/crash",
      "eval/softmax_lastdim/hang", "eval/softmax_lastdim/nowrite", "eval/sum_lastdim/-"};
  EXPECT_EQ(ids, want_ids);
  // A worker that could not write an output (a full scratch) is the harness's fault: unknown.
  const std::vector<std::string> want = {"INCORRECT_NUMERICAL",
                                         "INCORRECT_NUMERICAL",
                                         "RUNTIME_ERROR",
                                         "TIMEOUT",
                                         "MISSING",
                                         "MISSING"};
  EXPECT_EQ(statuses, want) << out.str();
  const auto& recs = j.at("records");
  for (const auto& rec : recs) {
    if (rec.at("id") == "eval/softmax_lastdim/nowrite") {
      EXPECT_NE(rec.at("status_reason").get<std::string>().find("could not write an output"),
                std::string::npos)
          << rec.at("status_reason");
    }
    if (rec.at("id") != "eval/softmax_lastdim/crash") continue;
    EXPECT_NE(rec.at("status_reason").get<std::string>().find("signal 11"), std::string::npos)
        << rec.at("status_reason");
  }
  // The hang was cut at its 3 s limit while the other pairs went on beside it.
  EXPECT_LT(s, 60.0);
  // KernelBench's layout: problem 1 is softmax_lastdim (the first task), with its five samples;
  // sum_lastdim had no candidate, so no samples. Nothing was timed: the baseline level is empty,
  // and fastp reads the pair as KernelBench files (0 aligned, exit 0).
  std::ifstream kbf(d / "kb/eval_results.json");
  const auto kb = nlohmann::json::parse(kbf);
  ASSERT_TRUE(kb.contains("1")) << kb.dump();
  EXPECT_EQ(kb["1"].size(), 5u);
  EXPECT_EQ(kb["1"][2]["metadata"]["kernelgate_status"], "RUNTIME_ERROR");
  EXPECT_EQ(kb["1"][4]["metadata"]["kernelgate_status"], "MISSING");
  EXPECT_FALSE(kb.contains("2"));
  std::ifstream basef(d / "kb/eval_results.baseline.json");
  EXPECT_TRUE(nlohmann::json::parse(basef).at("level1").empty());
  std::ostringstream fo, fe;
  EXPECT_EQ(
      kernelgate_main({"kernelgate", "fastp", (d / "kb/eval_results.json").string(), "--baseline",
                       (d / "kb/eval_results.baseline.json").string(), "--json"},
                      fo, fe),
      exit_code::ok)
      << fe.str();
  // Scratch tensors are gone; the worker logs stay.
  EXPECT_TRUE(fs::exists(d / "out/workers/worker-0.log"));
  remove_tree(d);
}

// The CPU side of a pair is shared where the data is the same: draw 0 of each shape is the trial
// the reference check uses, and the first timed set is draw 0 of the first shape. softmax_lastdim:
// 2 shapes x one draw per input regime, plus 4 timing sets of its own (a new draw, its variant,
// draw 0's variant, the fresh set).
TEST(eval_pipeline, timing_and_the_reference_check_reuse_correctness_trials) {
  const auto t = load_task(std::string(KG_SOURCE_DIR) + "/data/tasks/softmax_lastdim.json");
  sandbox_options opt;
  const std::size_t draws = std::max<std::size_t>(opt.trials, t.regimes.size());
  std::set<std::string> ids;
  for (const auto& k : planned_trials(t, opt))
    ids.insert(k.id());
  EXPECT_EQ(ids.size(), t.shapes.size() * draws + 4);
  task_input_regime normal;
  normal.strict_regime = 0;
  for (const auto& shape : t.shapes) // the reference check's keys are among them
    EXPECT_TRUE(ids.count(trial_key{&t, &shape, opt.seed, normal, true}.id())) << shape.name;
  opt.time = false;
  EXPECT_EQ(planned_trials(t, opt).size(), t.shapes.size() * draws);
}

// Every shape is checked in every regime the task declares, draw 0 in N(0,1); the order of the
// others and which draws run on a busy stream follow the seed.
TEST(eval_pipeline, every_regime_is_drawn_on_every_shape_in_a_seeded_order) {
  const auto t = load_task(std::string(KG_SOURCE_DIR) + "/data/tasks/softmax_lastdim.json");
  ASSERT_GE(t.regimes.size(), 3u);
  auto plan = [&](std::uint64_t seed) {
    sandbox_options opt;
    opt.seed = seed;
    opt.time = false;
    std::vector<std::pair<std::string, int>> out; // (shape, regime index) per draw
    for (const auto& k : planned_trials(t, opt))
      out.emplace_back(k.shape->name, k.regime.strict_regime);
    return out;
  };
  const auto a = plan(1), b = plan(2);
  for (const auto& shape : t.shapes) {
    std::set<int> seen;
    int first = -1;
    for (const auto& [s, r] : a)
      if (s == shape.name) {
        if (first < 0) first = r;
        seen.insert(r);
      }
    EXPECT_EQ(first, 0) << shape.name;
    EXPECT_EQ(seen.size(), t.regimes.size()) << shape.name;
  }
  EXPECT_EQ(plan(1), a); // the same seed, the same plan
  // Two seeds order the regimes differently (7 regimes: 6! orders, so two seeds that agree on
  // every shape would be a broken shuffle).
  EXPECT_NE(a, b);
}

namespace {

struct fake_eval {
  int rc = -1;
  nlohmann::json result;
  std::string out, err;
};

// `kernelgate eval` of one softmax_lastdim candidate (the task kernel, plus `extra` source) under
// the fake worker, with the given extra arguments.
fake_eval run_fake_eval(const fs::path& d, const std::string& extra,
                        std::vector<std::string> args) {
  const fs::path src = KG_SOURCE_DIR;
  remove_tree(d);
  fs::create_directories(d / "tasks");
  fs::create_directories(d / "cands/softmax_lastdim");
  fs::copy_file(src / "data/tasks/softmax_lastdim.json", d / "tasks/softmax_lastdim.json");
  std::ifstream in(src / "kernels/tasks/softmax_lastdim.cu");
  std::stringstream kernel;
  kernel << in.rdbuf();
  std::ofstream(d / "cands/softmax_lastdim/c.cu") << extra << kernel.str();
  ::setenv("KERNELGATE_FAKE_DEVICE", "1", 1);
  ::setenv("KERNELGATE_WORKER", KG_FAKE_WORKER_BIN, 1);
  std::vector<std::string> argv = {"kernelgate",   "eval",
                                   "--tasks",      (d / "tasks").string(),
                                   "--candidates", (d / "cands").string(),
                                   "--time",       "no",
                                   "--cache",      (d / "cache").string(),
                                   "--out",        (d / "out").string()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::ostringstream out, err;
  fake_eval r;
  r.rc = kernelgate_main(argv, out, err);
  ::unsetenv("KERNELGATE_FAKE_DEVICE");
  ::unsetenv("KERNELGATE_WORKER");
  r.out = out.str();
  r.err = err.str();
  std::ifstream f(d / "out/result.json");
  if (f) r.result = nlohmann::json::parse(f);
  return r;
}

const nlohmann::json& evaluation(const fake_eval& e) {
  for (const auto& rec : e.result.at("records"))
    if (rec.at("type") == "evaluation") return rec;
  throw std::runtime_error("no evaluation record");
}

} // namespace

// The seed is secret until the run ends, then published; --seed gives back the same inputs.
TEST(eval_pipeline, the_secret_seed_is_recorded_after_the_run_and_reproduces_it) {
  const fs::path d = fs::temp_directory_path() / ("kg-eval-seed-" + std::to_string(::getpid()));
  const struct cleanup {
    fs::path p;
    ~cleanup() { remove_tree(p); }
  } gone{d};
  const auto a = run_fake_eval(d, "", {});
  ASSERT_TRUE(a.result.contains("summary")) << a.err;
  const auto seed = a.result["summary"]["seed"]["value"].get<std::uint64_t>();
  EXPECT_EQ(a.result["summary"]["seed"]["source"], "secret (OS)");
  // Not in the configuration written before the run: only a statement that it is secret.
  EXPECT_TRUE(a.result["config"]["seed"].is_string()) << a.result["config"]["seed"];
  const auto b = run_fake_eval(d, "", {});
  EXPECT_NE(b.result["summary"]["seed"]["value"].get<std::uint64_t>(), seed);
  const auto c = run_fake_eval(d, "", {"--seed", std::to_string(seed)});
  EXPECT_EQ(c.result["summary"]["seed"]["value"].get<std::uint64_t>(), seed);
  EXPECT_EQ(c.result["config"]["seed"].get<std::uint64_t>(), seed);
  // The first draw the worker saw: the same bytes from the same seed, others from another.
  auto digest = [](const fake_eval& e) {
    return evaluation(e).at("detail").at("trials").at(0).at("worker").at("input_digest");
  };
  EXPECT_EQ(digest(a), digest(c));
  EXPECT_NE(digest(a), digest(b));
  std::ostringstream o, e;
  EXPECT_EQ(kernelgate_main(
                {"kernelgate", "eval", "--tasks", "x", "--candidates", "y", "--seed", "-4"}, o, e),
            exit_code::bad_input);
  EXPECT_NE(e.str().find("--seed"), std::string::npos) << e.str();
  remove_tree(d);
}

// Wrong outputs that differ on every call, re-run on the same inputs: NONDETERMINISTIC. The same
// wrong output every time (zeros): INCORRECT_NUMERICAL, naming the regime and the worst element.
TEST(eval_pipeline, a_failing_draw_is_rerun_and_labelled_by_what_the_reruns_show) {
  const fs::path d = fs::temp_directory_path() / ("kg-eval-label-" + std::to_string(::getpid()));
  const struct cleanup {
    fs::path p;
    ~cleanup() { remove_tree(p); }
  } gone{d};
  const auto vary = run_fake_eval(
      d, "__attribute__((used)) static const char marker[] = \"KG_FAKE_VARY\";\n", {"--seed", "7"});
  const auto& v = evaluation(vary);
  EXPECT_EQ(v.at("status"), "NONDETERMINISTIC") << v.dump(1).substr(0, 2000);
  EXPECT_EQ(v.at("detail").at("rerun").at("same_worker").at("calls"), 6);
  EXPECT_EQ(v.at("detail").at("rerun").at("fresh_worker").at("calls"), 6);
  const auto zeros = run_fake_eval(d, "", {"--seed", "7"});
  const auto& z = evaluation(zeros);
  EXPECT_EQ(z.at("status"), "INCORRECT_NUMERICAL");
  EXPECT_EQ(z.at("detail").at("failing_regime"), "normal");
  const auto& w = z.at("detail").at("worst_element");
  EXPECT_EQ(w.at("output"), "y");
  EXPECT_EQ(w.at("got"), 0.0);
  // Zeros are worst where the oracle is largest; softmax's input shaped like its output gives the
  // input value at that element.
  EXPECT_GT(w.at("expected").get<double>(), w.at("tolerance").get<double>());
  EXPECT_TRUE(w.at("inputs").at("x").is_number()) << w.dump();
  remove_tree(d);
}
