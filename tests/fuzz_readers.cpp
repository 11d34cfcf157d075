// kernelgate's own fuzz target: malformed inputs for every reader -- task JSON, result JSON,
// KernelBench's files, dimension expressions, suite files, suite runs (through compare), command
// lines -- generated from a seed by mutating
// valid ones, each run in-process through the functions the CLI uses. A case passes when it ends
// in a clean error (one line, a documented exit code) or a valid result; anything else (an
// exception outside the error path, a crash) fails the run.
//
//   kg_fuzz_readers [--seed N] [--cases N]
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/rng.h"
#include "reports/json_input.h"
#include "reports/json_schema.h"
#include "reports/remove_tree.h"
#include "reports/result_schema.h"
#include "suite/cli.h"
#include "suite/task_catalog.h"
#include "workloads/task.h"

namespace fs = std::filesystem;
using namespace kg;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// One random edit of `s`: the kinds of damage real files and hostile authors produce.
std::string mutate(std::string s, rng& r) {
  static const std::vector<std::string> pieces = {"1e400",
                                                  "-1e400",
                                                  "99999999999999999999",
                                                  "NaN",
                                                  "null",
                                                  "\"\"",
                                                  "[]",
                                                  "{}",
                                                  "\"\\u0000\"",
                                                  "\n",
                                                  "\"a\\nb\"",
                                                  "-0",
                                                  "0.0000001e-330",
                                                  "true",
                                                  "\"../../etc\"",
                                                  ",",
                                                  ":",
                                                  "\"R*C/0\""};
  const auto n = static_cast<std::uint64_t>(s.size());
  switch (r.below(9)) {
  case 0: // flip a byte
    if (n) s[r.below(n)] = static_cast<char>(r.below(256));
    break;
  case 1: // cut short
    s.resize(n ? r.below(n) : 0);
    break;
  case 2: // delete a span
    if (n) {
      const auto at = r.below(n);
      s.erase(at, r.below(64) + 1);
    }
    break;
  case 3: // insert a token
    s.insert(n ? r.below(n) : 0, pieces[r.below(pieces.size())]);
    break;
  case 4: { // deep nesting
    const auto depth = 10 + r.below(3000);
    s.insert(n ? r.below(n) : 0, std::string(depth, '[') + std::string(depth, ']'));
    break;
  }
  case 5: // a long string value
    s.insert(n ? r.below(n) : 0, "\"" + std::string(r.below(200000), 'x') + "\"");
    break;
  case 6: // duplicate a span
    if (n) {
      const auto at = r.below(n);
      s.insert(r.below(n), s.substr(at, r.below(200)));
    }
    break;
  case 7: // replace a number with an extreme one
    for (std::size_t i = 0; i < s.size(); ++i)
      if (std::isdigit(static_cast<unsigned char>(s[i])) && r.below(4) == 0) {
        s.replace(i, 1, pieces[r.below(3)]);
        break;
      }
    break;
  default: // a control character
    s.insert(n ? r.below(n) : 0, 1, static_cast<char>(r.below(32)));
  }
  return s;
}

struct stats {
  int cases = 0, clean_errors = 0, accepted = 0, failures = 0;
};

void fail(stats& st, const std::string& kind, int c, const std::string& why) {
  ++st.failures;
  std::cout << "FAIL case " << c << " (" << kind << "): " << printable(why, 300) << "\n";
}

// The CLI on argv: a documented exit code, and a one-line error for bad input.
void cli_case(stats& st, int c, const std::vector<std::string>& argv, const std::string& kind) {
  std::ostringstream out, err;
  int rc = -1;
  try {
    rc = kernelgate_main(argv, out, err);
  } catch (const std::exception& e) {
    return fail(st, kind, c, std::string("exception escaped: ") + e.what());
  }
  const std::string e = err.str();
  const auto lines = std::count(e.begin(), e.end(), '\n');
  if (rc != 0 && rc != 1 && rc != 2 && rc != 3)
    return fail(st, kind, c, "exit " + std::to_string(rc) + ": " + e);
  if (rc == 2 && (lines != 1 || e.rfind("kernelgate: ", 0) != 0))
    return fail(st, kind, c, "bad input answered in " + std::to_string(lines) + " lines: " + e);
  (rc == 0 ? st.accepted : st.clean_errors)++;
}

} // namespace

int main(int argc, char** argv) {
  std::uint64_t seed = 20261201;
  int cases = 3000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--seed") seed = std::strtoull(argv[i + 1], nullptr, 10);
    if (a == "--cases") cases = std::atoi(argv[i + 1]);
  }
  const fs::path src = KG_SOURCE_DIR;
  const fs::path dir = fs::temp_directory_path() / ("kg-fuzz-" + std::to_string(::getpid()));
  remove_tree(dir);
  fs::create_directories(dir / "t");
  std::vector<std::string> tasks;
  for (const auto& e : fs::directory_iterator(src / "data/tasks"))
    tasks.push_back(slurp(e.path()));
  std::sort(tasks.begin(), tasks.end());
  const std::string kb_eval =
      R"({"1": [{"sample_id": 0, "compiled": true, "correctness": true, "runtime": 1.5,)"
      R"( "metadata": {}, "runtime_stats": {}}], "2": [{"sample_id": 0, "compiled": true,)"
      R"( "correctness": false, "runtime": -1.0, "metadata": {}, "runtime_stats": {}}]})";
  const std::string kb_base =
      R"({"level1": {"1_A.py": {"mean": 2.0, "std": 0.1}, "2_B.py": {"mean": 1.0}}})";
  const std::string result =
      R"({"schema": "kernelgate.result/1", "kind": "eval", "created": "2026-01-01T00:00:00Z",)"
      R"( "finished": "2026-01-01T00:00:01Z", "argv": ["kernelgate"], "environment": {},)"
      R"( "config": {"intended_tasks": ["a"]}, "records": [{"type": "evaluation", "id":)"
      R"( "eval/a/c", "task": "a", "candidate": "c", "status": "PASSED", "candidate_us": 2.0,)"
      R"( "baseline_us": 3.0, "speedup": 1.5, "speedup_ci95": [1.4, 1.6]}], "summary": {}})";
  // A suite file (smoke, its workloads resolved) and a suite run of two workloads: mutated, they
  // go through `suite show FILE` and `compare`.
  std::string suite_text;
  {
    std::ostringstream out, err;
    kernelgate_main({"kernelgate", "suite", "show", "smoke", "--json"}, out, err);
    suite_text = out.str();
  }
  const std::string run_result =
      R"({"schema": "kernelgate.result/1", "kind": "suite_run", "created": "2026-01-01T00:00:00Z",)"
      R"( "finished": "2026-01-01T00:00:09Z", "argv": ["kernelgate"], "environment": {"gpu":)"
      R"( {"name": "G"}}, "config": {"suite": "smoke", "clock_policy": "observe"}, "records":)"
      R"( [{"type": "suite_workload", "id": "kernel.gemv.down.b1", "level": "kernel", "kind":)"
      R"( "gemv", "params": {}, "metric": {"name": "kernel_seconds", "direction": "lower",)"
      R"( "unit": "s"}, "samples": [1.0e-5, 1.1e-5, 1.05e-5], "estimate": 1.05e-5, "ci95":)"
      R"( [1.0e-5, 1.1e-5], "sol": null, "gates": [{"name": "oracle_fp64", "pass": true,)"
      R"( "detail": ""}], "roles": {}, "wall_seconds": 0.1}, {"type": "suite_workload", "id":)"
      R"( "serving.p99.all1.512-2048.solo", "level": "serving", "kind": "serving_p99", "params":)"
      R"( {}, "metric": {"name": "p99_itl_ms", "direction": "lower", "unit": "ms"}, "error":)"
      R"( "out of memory", "sol": null, "gates": [{"name": "measured", "pass": false, "detail":)"
      R"( ""}], "roles": {}, "wall_seconds": 0.2}], "summary": {"status": "complete"}})";
  const auto schema = nlohmann::json::parse(result_schema_text());
  rng r(seed, stream_id("fuzz"));
  stats st;
  for (int c = 0; c < cases; ++c) {
    ++st.cases;
    const auto kind = r.below(7);
    std::string text;
    auto mutated = [&](std::string base) {
      const auto edits = 1 + r.below(4);
      for (std::uint64_t k = 0; k < edits; ++k)
        base = mutate(std::move(base), r);
      return base;
    };
    if (kind == 0) { // a task file through the catalog loader, as eval reads it
      const auto& base = tasks[r.below(tasks.size())];
      const std::string id = nlohmann::json::parse(base).at("id");
      std::ofstream(dir / "t" / (id + ".json"), std::ios::binary) << mutated(base);
      try {
        (void)load_task(dir / "t" / (id + ".json"));
        ++st.accepted;
      } catch (const task_error& e) {
        const std::string w = e.what();
        if (w.find('\n') != std::string::npos) fail(st, "task", c, "two-line error: " + w);
        ++st.clean_errors;
      } catch (const std::exception& e) {
        fail(st, "task", c, std::string("exception escaped: ") + e.what());
      }
      fs::remove(dir / "t" / (id + ".json"));
    } else if (kind == 1) { // a result through validate
      std::ofstream(dir / "r.json", std::ios::binary) << mutated(result);
      cli_case(st, c, {"kernelgate", "validate", (dir / "r.json").string()}, "validate");
    } else if (kind == 2) { // KernelBench's pair through fastp
      const bool which = r.below(2);
      std::ofstream(dir / "e.json", std::ios::binary) << (which ? mutated(kb_eval) : kb_eval);
      std::ofstream(dir / "b.json", std::ios::binary) << (which ? kb_base : mutated(kb_base));
      cli_case(st, c,
               {"kernelgate", "fastp", (dir / "e.json").string(), "--baseline",
                (dir / "b.json").string()},
               "fastp");
    } else if (kind == 3) { // a dimension expression
      const std::string e = mutated("(R+1)*C/2-3");
      try {
        (void)eval_dim_expr(e, {{"R", 3}, {"C", 5}});
        ++st.accepted;
      } catch (const std::invalid_argument&) {
        ++st.clean_errors;
      } catch (const std::exception& ex) {
        fail(st, "expression", c, std::string("exception escaped: ") + ex.what());
      }
    } else if (kind == 5) { // a suite file
      std::ofstream(dir / "s.json", std::ios::binary) << mutated(suite_text);
      cli_case(st, c, {"kernelgate", "suite", "show", (dir / "s.json").string()}, "suite");
    } else if (kind == 6) { // two suite runs, one of them mutated, through compare
      const bool which = r.below(2);
      std::ofstream(dir / "a.json", std::ios::binary) << (which ? mutated(run_result) : run_result);
      std::ofstream(dir / "b.json", std::ios::binary) << (which ? run_result : mutated(run_result));
      cli_case(st, c,
               {"kernelgate", "compare", (dir / "a.json").string(), (dir / "b.json").string()},
               "compare");
    } else { // a command line
      static const std::vector<std::vector<std::string>> lines = {
          {"fastp", "x.json", "--p", "1,2", "--min-effect", "0.03"},
          {"eval", "--tasks", "x", "--candidates", "y", "--trials", "3", "--seed", "5"},
          // (implementation and workload names no mutation turns into real ones: nothing here
          // may start a measurement)
          {"time", "--impl", "layernormQ", "--shape", "64x64", "--min-effect", "0.03"},
          {"workload", "run", "lora-train-smallQ", "--steps", "2", "--jobs", "1"},
          {"validate", "x.json"},
          {"run", "--suite", "smokeQ", "--filter", "gemv", "--repeats", "2", "--dry-run"},
          {"compare", "x", "y", "--min-effect", "0.03"},
          {"protocols", "--json"}};
      auto args = lines[r.below(lines.size())];
      const auto i = r.below(args.size());
      args[i] = mutated(args[i]);
      if ((args[0] == "workload" || args[0] == "time") && args[i == 2 ? 2 : 2].size() < 11)
        continue; // the mutation cut the name back to a real one
      if (args[0] == "run" && std::find(args.begin(), args.end(), "--dry-run") == args.end())
        continue; // a mutation dropped --dry-run: it might start a measurement
      args.insert(args.begin(), "kernelgate");
      cli_case(st, c, args, "options");
    }
  }
  remove_tree(dir);
  std::cout << st.cases << " cases (seed " << seed << "): " << st.clean_errors << " clean errors, "
            << st.accepted << " accepted, " << st.failures << " failures\n";
  return st.failures == 0 ? 0 : 1;
}
