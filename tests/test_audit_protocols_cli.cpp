// `kernelgate audit checker --protocol all` end to end without a GPU: KERNELGATE_FAKE_DEVICE=1
// with the stand-in worker (tests/fake_worker.cpp writes zeros for every output; a candidate
// carrying KG_FAKE_CRASH kills it). Real mutants of two tasks are compiled by nvcc; the tasks'
// shapes are shrunk so the fp64 side is quick. What must come out follows from the fixture:
// zeros are wrong for relu and abs on normal inputs, so every protocol rejects every relu
// candidate (the control too: the checkers are invalid there, exit 1); every mutant disagrees
// with the oracle, but only where its control does too, so none counts as witnessed; a candidate
// that crashes on load costs one worker run per distinct first input set of the protocols, then
// one at the witness plan; a mutant that hangs is cut by the per-call limit its control set, as the
// real worker's watchdog cuts it (exit 6), and is decided as the crashing one is.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "mutants/kill_matrix.h"
#include "oracles/protocol.h"
#include "sandbox/mutant_audit.h"
#include "sandbox/trial_cache.h"
#include "scratch_dir.h"
#include "suite/audit_protocols_command.h"
#include "suite/exit_codes.h"
#include "suite/task_catalog.h"
#include "workloads/witness_plan.h"

using namespace kg;
using kg::test::run;
namespace fs = std::filesystem;

namespace {

// The crash kernel with another marker: the stand-in answers it as an object that cannot load.
std::string noload_kernel();

const char* crash_kernel =
    "#include <kg_candidate.h>\n"
    "__attribute__((used)) static const char marker[] = \"KG_FAKE_CRASH\";\n"
    "__global__ void absk(const float* x, float* y, long n) {\n"
    "  long i = blockIdx.x * 256L + threadIdx.x;\n"
    "  if (i < n) y[i] = fabsf(x[i]);\n"
    "}\n"
    "extern \"C\" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out,\n"
    "                        cudaStream_t s) {\n"
    "  long n = in[0].shape[0];\n"
    "  absk<<<(n + 255) / 256, 256, 0, s>>>((const float*)in[0].data, (float*)out[0].data, n);\n"
    "  return 0;\n"
    "}\n";

// The crash kernel with a third marker: the stand-in hangs under a per-call limit (the mutants
// get one from their control; the control runs without one).
std::string trial_hang_kernel() {
  std::string k = crash_kernel;
  k.replace(k.find("KG_FAKE_CRASH"), 13, "KG_FAKE_TRIAL_HANG");
  k.replace(k.find("fabsf(x[i])"), 11, "x[i] / (1.0f + expf(-x[i]))");
  return k;
}

std::string noload_kernel() {
  std::string k = crash_kernel;
  k.replace(k.find("KG_FAKE_CRASH"), 13, "KG_FAKE_NOLOAD");
  k.replace(k.find("fabsf"), 5, "expf");
  return k;
}

// A task file with small shapes (the same task otherwise).
void small_task(const fs::path& from, const fs::path& to) {
  std::ifstream in(from);
  auto j = nlohmann::json::parse(in);
  j["shapes"] = nlohmann::json::parse(
      R"([{"name": "aligned", "dims": {"N": 4096}}, {"name": "tail", "dims": {"N": 1001}}])");
  std::ofstream(to) << j.dump(1) << "\n";
}

std::vector<nlohmann::json> jsonl(const fs::path& f) {
  std::vector<nlohmann::json> out;
  std::ifstream in(f);
  for (std::string line; std::getline(in, line);)
    out.push_back(nlohmann::json::parse(line));
  return out;
}

// `kernelgate ARGS` against the stand-in worker (KERNELGATE_FAKE_DEVICE, KERNELGATE_WORKER), its
// compile cache under `base`, with `extra` variables set for this run only.
kg::test::run_result
fake_audit(const fs::path& base, std::vector<std::string> args,
           const std::vector<std::pair<const char*, const char*>>& extra = {}) {
  ::setenv("KERNELGATE_FAKE_DEVICE", "1", 1);
  ::setenv("KERNELGATE_WORKER", KG_FAKE_WORKER_BIN, 1);
  ::setenv("KERNELGATE_CACHE", (base / "cache").c_str(), 1);
  for (const auto& [var, value] : extra)
    ::setenv(var, value, 1);
  auto r = run(std::move(args));
  for (const char* var : {"KERNELGATE_FAKE_DEVICE", "KERNELGATE_WORKER", "KERNELGATE_CACHE"})
    ::unsetenv(var);
  for (const auto& [var, value] : extra)
    ::unsetenv(var);
  return r;
}

struct audit_fixture {
  fs::path root, catalog, out, phases, manifests;
  kg::test::run_result r;
  std::size_t relu_mutants = 0, abs_mutants = 0, exp_mutants = 0, silu_mutants = 0;
};

const audit_fixture& fx() {
  static const audit_fixture f = [] {
    audit_fixture x;
    const fs::path src = KG_SOURCE_DIR;
    const auto base = kg::test::scratch_dir("audit-protocols");
    x.root = base / "root";
    x.catalog = base / "catalog";
    x.out = base / "out";
    fs::create_directories(x.root / "kernels/tasks");
    fs::create_directories(x.root / "data/tasks");
    fs::copy_file(src / "kernels/tasks/relu.cu", x.root / "kernels/tasks/relu.cu");
    std::ofstream(x.root / "kernels/tasks/abs_fp32.cu") << crash_kernel;
    std::ofstream(x.root / "kernels/tasks/exp_fp32.cu") << noload_kernel();
    std::ofstream(x.root / "kernels/tasks/silu.cu") << trial_hang_kernel();
    small_task(src / "data/tasks/silu.json", x.root / "data/tasks/silu.json");
    small_task(src / "data/tasks/exp_fp32.json", x.root / "data/tasks/exp_fp32.json");
    small_task(src / "data/tasks/relu.json", x.root / "data/tasks/relu.json");
    small_task(src / "data/tasks/abs_fp32.json", x.root / "data/tasks/abs_fp32.json");
    const auto g = run({"mutants", "generate", "--root", x.root.string(), "--kernels",
                        "kernels/tasks/*.cu", "--out", x.catalog.string()});
    EXPECT_EQ(g.rc, exit_code::ok) << g.err;
    for (const auto& m : jsonl(x.catalog / "catalog.jsonl"))
      ++(m.at("task") == "relu"       ? x.relu_mutants
         : m.at("task") == "abs_fp32" ? x.abs_mutants
         : m.at("task") == "silu"     ? x.silu_mutants
                                      : x.exp_mutants);
    ::setenv("KERNELGATE_FAKE_DEVICE", "1", 1);
    ::setenv("KERNELGATE_WORKER", KG_FAKE_WORKER_BIN, 1);
    ::setenv("KERNELGATE_CACHE", (base / "cache").c_str(), 1);
    // (Read at this process's first phase: the fixture runs before any other here.)
    x.phases = base / "phases.log";
    ::setenv("KG_PHASE_LOG", x.phases.c_str(), 1);
    x.manifests = base / "manifests.log";
    ::setenv("KG_FAKE_MANIFEST_LOG", x.manifests.c_str(), 1);
    x.r = run({"audit", "checker", "--protocol", "all", "--catalog", x.catalog.string(), "--root",
               x.root.string(), "--workers", "2", "--timeout", "20", "--out", x.out.string()});
    ::unsetenv("KERNELGATE_FAKE_DEVICE");
    ::unsetenv("KERNELGATE_WORKER");
    ::unsetenv("KERNELGATE_CACHE");
    ::unsetenv("KG_PHASE_LOG");
    ::unsetenv("KG_FAKE_MANIFEST_LOG");
    return x;
  }();
  return f;
}

} // namespace

TEST(audit_protocols_cli, every_protocol_is_a_column_and_a_rejected_control_fails_the_run) {
  const auto& f = fx();
  ASSERT_GT(f.relu_mutants, 0u);
  ASSERT_GT(f.abs_mutants, 0u);
  ASSERT_GT(f.exp_mutants, 0u);
  EXPECT_EQ(f.r.rc, exit_code::failures) << f.r.out << f.r.err;
  std::ifstream in(f.out / "kill_matrix.json");
  const auto km = kill_matrix::from_json(nlohmann::json::parse(in));
  std::vector<std::string> names;
  for (const auto n : protocol_names())
    names.emplace_back(n);
  EXPECT_EQ(km.checkers(), names);
  ASSERT_GT(f.silu_mutants, 0u);
  EXPECT_EQ(km.rows().size(), 4 + f.relu_mutants + f.abs_mutants + f.exp_mutants + f.silu_mutants);
  // Zeros are wrong: every candidate that compiled is rejected by every protocol. The controls
  // fail every configuration too, so no mutant's disagreement counts: all are unwitnessed.
  std::size_t compiled_mutants = 0;
  for (const auto& row : km.rows()) {
    if (row.status == witness_status::compile_error) continue;
    if (!row.control) {
      EXPECT_EQ(row.status, witness_status::unwitnessed) << row.id;
      ++compiled_mutants;
    }
    for (const auto& c : names)
      EXPECT_EQ(km.at(row.id, c), kill_verdict::killed) << row.id << " " << c;
  }
  for (const auto& c : names) {
    EXPECT_EQ(km.false_rejections(c).size(), 4u) << c;
    EXPECT_EQ(km.score(c).intended, 0) << c;
  }
  std::ifstream si(f.out / "summary.json");
  const auto summary = nlohmann::json::parse(si);
  EXPECT_EQ(summary.at("unwitnessed_because_a_control_fails_there"), compiled_mutants);
  EXPECT_EQ(summary.at("guard_bytes"), 2u << 20); // the default: 2 MiB guards
  EXPECT_NE(f.r.out.find("rejected a correct kernel: invalid for abs_fp32 exp_fp32 relu silu"),
            std::string::npos)
      << f.r.out;
}

TEST(audit_protocols_cli, a_crashing_candidate_costs_one_run_per_input_set_then_the_witness) {
  const auto& f = fx();
  const auto task = load_task(f.root / "data/tasks/abs_fp32.json");
  const auto plan = witness_plan(task);
  ASSERT_GT(plan.size(), 2u);
  int seen = 0;
  for (const auto& v : jsonl(f.out / "verdicts.jsonl")) {
    if (v.at("task") != "abs_fp32") continue;
    ++seen;
    // A run per distinct first input set, each ended by the crash there: kernelbench,
    // kernelbench-v0 and kbv share theirs (uniform [0, 1), identity parameters, the same seed,
    // scale 1); sol, flashinfer, strict's first draw and the witness plan's first configuration
    // are N(0,1) from the protocols' seed on the first shape, and abs has no parameters, so the
    // same bytes: one call, after which the plan stops (a crash witnesses it).
    EXPECT_EQ(v.at("worker_runs"), 2) << v.dump();
    EXPECT_EQ(v.at("crashes"), 2) << v.dump();
    for (const auto& [name, c] : v.at("checks").items())
      EXPECT_EQ(c.at("verdict"), "killed") << name;
  }
  EXPECT_GE(seen, 1);
  for (const auto& w : jsonl(f.out / "witnesses.jsonl")) {
    if (w.at("task") != "abs_fp32") continue;
    if (w.at("control")) continue;
    // Witnessed by the crash, then unwitnessed: the control crashes on the same configurations.
    EXPECT_EQ(w.at("status"), "unwitnessed");
    EXPECT_NE(w.value("status_reason", "").find("correct kernel"), std::string::npos);
    const std::string kills = w.at("kills");
    ASSERT_EQ(kills.size(), plan.size());
    EXPECT_EQ(kills, "1" + std::string(plan.size() - 1, '0'));
    EXPECT_NE(w.at("evidence").at("crash").get<std::string>().find("worker"), std::string::npos);
  }
}

// The first stage sends each protocol's first trial and the witness plan; a protocol that
// rejects there is not run further. Zeros are wrong for relu and silu on every protocol's first
// input, so each relu candidate and silu's control is one manifest: the plan and the one first
// input set of the six protocols' that is not one of the plan's (kernelbench, kernelbench-v0 and
// kbv share a uniform one; sol, flashinfer and strict's N(0,1) one is the plan's first) and the
// plan (the stand-in logs the manifests it runs: abs and exp's candidates crash or fail to load
// before that, silu's mutants hang).
TEST(audit_protocols_cli, protocols_that_reject_at_their_first_trial_run_no_other) {
  const auto& f = fx();
  const auto first_stage = [&](const char* task) {
    return 1 +
           witness_plan(load_task(f.root / "data/tasks" / (std::string(task) + ".json"))).size();
  };
  std::map<std::size_t, std::size_t> manifests_of_size;
  std::ifstream in(f.manifests);
  for (std::string so; in >> so;) {
    std::size_t n = 0;
    in >> n;
    ++manifests_of_size[n];
  }
  std::size_t relu_runs = 0;
  for (const auto& v : jsonl(f.out / "verdicts.jsonl"))
    if (v.at("task") == "relu") {
      EXPECT_EQ(v.at("worker_runs"), 1) << v.dump();
      ++relu_runs;
    }
  ASSERT_GT(relu_runs, 1u);
  std::map<std::size_t, std::size_t> expected;
  expected[first_stage("relu")] += relu_runs;
  expected[first_stage("silu")] += 1;
  EXPECT_EQ(manifests_of_size, expected);
}

TEST(audit_protocols_cli, a_hang_is_cut_by_the_limit_its_control_set) {
  const auto& f = fx();
  int mutants = 0, hung_runs = 0;
  for (const auto& v : jsonl(f.out / "verdicts.jsonl")) {
    if (v.at("task") != "silu") continue;
    if (v.at("row").get<std::string>().rfind("control:", 0) == 0) {
      // The control runs first and without a limit: it answers (zeros) in one run.
      EXPECT_EQ(v.at("trial_limit_seconds"), 0.0) << v.dump();
      EXPECT_EQ(v.at("worker_runs"), 1) << v.dump();
      EXPECT_EQ(v.at("hangs"), 0) << v.dump();
      continue;
    }
    ++mutants;
    // The stand-in reports calls of no time, so the limit is its floor: KernelBench's longest
    // passing call (180 s over 5 trials, 3 warm-up and 100 timed calls), above the 1 s minimum.
    EXPECT_DOUBLE_EQ(v.at("trial_limit_seconds").get<double>(), 180.0 / 108) << v.dump();
    // As the crashing candidate: a run per distinct first input set (the second one the witness
    // plan's first configuration too), each a hang.
    EXPECT_EQ(v.at("worker_runs"), 2) << v.dump();
    EXPECT_EQ(v.at("hangs"), 2) << v.dump();
    hung_runs += v.at("hangs").get<int>();
    for (const auto& [name, c] : v.at("checks").items()) {
      EXPECT_EQ(c.at("verdict"), "killed") << name;
      EXPECT_NE(c.at("reason").get<std::string>().find("hung (the call ran past the per-trial "
                                                       "limit of 1.66667 s)"),
                std::string::npos)
          << c.dump();
    }
  }
  EXPECT_GE(mutants, 1);
  std::ifstream si(f.out / "summary.json");
  const auto summary = nlohmann::json::parse(si);
  EXPECT_EQ(summary.at("hangs"), hung_runs);
  EXPECT_EQ(summary.at("timeouts"), 0);
}

TEST(audit_protocols_cli, an_object_that_does_not_load_is_decided_in_one_run) {
  const auto& f = fx();
  const auto task = load_task(f.root / "data/tasks/exp_fp32.json");
  const auto plan = witness_plan(task);
  int seen = 0;
  for (const auto& v : jsonl(f.out / "verdicts.jsonl")) {
    if (v.at("task") != "exp_fp32") continue;
    ++seen;
    EXPECT_EQ(v.at("worker_runs"), 1) << v.dump();
    for (const auto& [name, c] : v.at("checks").items()) {
      EXPECT_EQ(c.at("verdict"), "killed") << name;
      EXPECT_NE(c.at("reason").get<std::string>().find("cannot load"), std::string::npos);
    }
  }
  EXPECT_GE(seen, 1);
  for (const auto& w : jsonl(f.out / "witnesses.jsonl"))
    if (w.at("task") == "exp_fp32") {
      EXPECT_EQ(w.at("kills"), std::string(plan.size(), '1'));
    }
}

TEST(audit_protocols_cli, outputs_carry_phases_suites_and_a_report_per_protocol) {
  const auto& f = fx();
  std::ifstream in(f.out / "summary.json");
  const auto s = nlohmann::json::parse(in);
  for (const char* p : {"compile", "witness_and_protocols", "report", "total"})
    EXPECT_GE(s.at("phases_seconds").at(p).get<double>(), 0.0) << p;
  EXPECT_EQ(s.at("controls"), 4);
  // Twice as many judging threads as workers by default (a worker is held only for a run).
  EXPECT_EQ(s.at("judges").get<int>(), 2 * s.at("workers").get<int>());
  EXPECT_FALSE(s.at("protocols").at("strict").at("valid").get<bool>());
  for (const auto n : protocol_names())
    EXPECT_TRUE(fs::is_regular_file(f.out / ("report." + std::string(n) + ".mutation.json"))) << n;
  // No witnessed mutant (the controls fail everywhere): no suite to suggest.
  std::ifstream si(f.out / "input_suites.json");
  EXPECT_EQ(nlohmann::json::parse(si), nlohmann::json::object());
  // The compile runs while the judging starts: its line comes when it ends, and each mutant that
  // does not compile is an item line of its own.
  const auto at = f.r.out.find("compile: ");
  ASSERT_NE(at, std::string::npos) << f.r.out;
  const int failed = std::stoi(f.r.out.substr(f.r.out.find(" s (", at) + 4));
  std::size_t lines = 0;
  for (std::size_t p = 0; (p = f.r.out.find("  does not compile\n", p)) != std::string::npos; ++p)
    ++lines;
  EXPECT_EQ(lines, static_cast<std::size_t>(failed)) << f.r.out;
  EXPECT_EQ(s.at("candidates_run").get<std::size_t>() + lines,
            4 + f.relu_mutants + f.abs_mutants + f.exp_mutants + f.silu_mutants -
                s.at("witness_statuses").value("compile_error", 0) + failed);
  // The parent's judging of each trial's outputs is a phase of its own (timing/phase_log.h).
  const auto phases = kg::test::slurp(f.phases);
  EXPECT_NE(phases.find(" audit.judge "), std::string::npos) << phases.substr(0, 2000);
  EXPECT_NE(phases.find(" audit.peer_reference "), std::string::npos);
  // Nothing left in the scratch folder (memory-backed where it can be).
  EXPECT_FALSE(fs::exists(f.out / "work"));
  EXPECT_FALSE(fs::exists("/dev/shm/kernelgate-audit-" + std::to_string(::getpid())));
}

TEST(audit_protocols_cli, audit_merge_of_the_run_alone_gives_its_scores_and_statuses) {
  // `audit merge` recomputes the scores from the kill matrix; over this one run it must give what
  // the run itself wrote.
  const auto& f = fx();
  const auto merged = kg::test::scratch_dir("audit-protocols") / "merged-alone";
  const auto r = run({"audit", "merge", f.out.string(), "--out", merged.string()});
  EXPECT_EQ(r.rc, exit_code::failures) << r.err; // the run's controls were rejected (zeros)
  std::ifstream a(f.out / "summary.json"), b(merged / "summary.json");
  const auto own = nlohmann::json::parse(a), m = nlohmann::json::parse(b);
  EXPECT_EQ(m.at("protocols"), own.at("protocols"));
  EXPECT_EQ(m.at("witness_statuses"), own.at("witness_statuses"));
  EXPECT_EQ(m.at("phases_seconds_summed").at("total"), own.at("phases_seconds").at("total"));
  EXPECT_EQ(kg::test::slurp(merged / "kill_matrix.json"),
            kg::test::slurp(f.out / "kill_matrix.json"));
}

TEST(audit_protocols_cli, bad_input_is_one_line_and_runs_nothing) {
  const auto& f = fx();
  const auto out = kg::test::scratch_dir("audit-protocols") / "bad";
  auto r = run({"audit", "checker", "--protocol", "kernelbench,nope", "--catalog",
                f.catalog.string(), "--root", f.root.string(), "--out", out.string()});
  EXPECT_EQ(r.rc, exit_code::bad_input);
  EXPECT_NE(r.err.find("unknown protocol 'nope'"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);
  r = run({"audit", "checker", "--protocol", "strict", "--cmd", "true {candidate}", "--catalog",
           f.catalog.string(), "--out", out.string()});
  EXPECT_EQ(r.rc, exit_code::bad_input);
  EXPECT_NE(r.err.find("alternatives"), std::string::npos) << r.err;
  r = run({"audit", "checker", "--catalog", f.catalog.string(), "--out", out.string()});
  EXPECT_EQ(r.rc, exit_code::bad_input);
  EXPECT_NE(r.err.find("give --cmd or --protocol"), std::string::npos) << r.err;
  // Each audit setting with a value it does not take: bad input naming the variable and value.
  for (const auto& [var, value] :
       {std::pair{"KERNELGATE_AUDIT_CONNECTIONS", "many"},
        std::pair{"KERNELGATE_AUDIT_SYNC", "busy"}, std::pair{"KERNELGATE_AUDIT_JUDGES", "0"}}) {
    ::setenv(var, value, 1);
    r = run({"audit", "checker", "--protocol", "strict", "--catalog", f.catalog.string(), "--root",
             f.root.string(), "--out", out.string()});
    ::unsetenv(var);
    EXPECT_EQ(r.rc, exit_code::bad_input) << var;
    EXPECT_NE(r.err.find(std::string(var) + "='" + value + "'"), std::string::npos) << r.err;
  }
  for (const char* guard : {"2MiB", "-1", "2147483648"}) {
    ::setenv("KERNELGATE_AUDIT_GUARD", guard, 1);
    r = run({"audit", "checker", "--protocol", "strict", "--catalog", f.catalog.string(), "--root",
             f.root.string(), "--out", out.string()});
    ::unsetenv("KERNELGATE_AUDIT_GUARD");
    EXPECT_EQ(r.rc, exit_code::bad_input) << guard;
    std::string named = "KERNELGATE_AUDIT_GUARD='";
    named.append(guard).append("'");
    EXPECT_NE(r.err.find(named), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(out / "verdicts.jsonl"));
}

TEST(audit_protocols_cli, the_sanitizer_pass_reports_the_tool_that_found_a_hazard) {
  const auto base = kg::test::scratch_dir("audit-protocols") / "sanitizer";
  fs::create_directories(base);
  auto t = load_task(fs::path(KG_SOURCE_DIR) / "data/tasks/relu.json");
  t.shapes = {{"small", {{"N", 64}}}};
  const witness_trials w(t, witness_plan(t));
  trial_cache cache(base / "trials");
  mutant_audit_options opt;
  opt.self_exe = "/bin/true";
  opt.work_dir = base / "run";
  opt.cache = &cache;
  compile_result compiled;
  compiled.ok = true;
  compiled.shared_object = base / "none.so";
  // Stand-ins for compute-sanitizer: one that reports a hazard under synccheck only (exit 86, the
  // --error-exitcode asked for), one that reports none.
  const auto finds = base / "finds.sh", clean = base / "clean.sh";
  std::ofstream(finds)
      << "#!/bin/sh\n[ \"$2\" = synccheck ] && { echo hazard; exit 86; }\nexit 0\n";
  std::ofstream(clean) << "#!/bin/sh\nexit 0\n";
  fs::permissions(finds, fs::perms::owner_all);
  fs::permissions(clean, fs::perms::owner_all);
  const auto found = sanitize_candidate(t, compiled, w, opt, finds);
  EXPECT_TRUE(found.ran);
  EXPECT_TRUE(found.found);
  EXPECT_EQ(found.tool, "synccheck");
  EXPECT_NE(found.detail.find("hazard"), std::string::npos) << found.detail;
  const auto none = sanitize_candidate(t, compiled, w, opt, clean);
  EXPECT_TRUE(none.ran);
  EXPECT_FALSE(none.found);
  EXPECT_FALSE(sanitize_candidate(t, compiled, w, opt, "").ran);
  EXPECT_FALSE(fs::exists(opt.work_dir));
}

TEST(audit_protocols_cli, the_judging_order_runs_each_tasks_controls_ahead_of_its_mutants) {
  // A: a control, 5 mutants; B: 2 controls, 3 mutants; C: a control, no mutant; D: a control, 2.
  const std::vector<std::string> task = {"A", "A", "A", "A", "A", "A", "B", "B",
                                         "B", "B", "B", "C", "D", "D", "D"};
  std::vector<bool> control(task.size(), false);
  for (const std::size_t i : {0u, 6u, 7u, 11u, 12u})
    control[i] = true;
  std::vector<std::size_t> given(task.size());
  for (std::size_t i = 0; i < given.size(); ++i)
    given[i] = i;
  EXPECT_EQ(audit_judging_order(task, control, 0), given);
  // Lead 2: B's controls two mutants of A before B's first; C's and D's two before D's first.
  EXPECT_EQ(audit_judging_order(task, control, 2),
            (std::vector<std::size_t>{0, 1, 2, 3, 6, 7, 4, 5, 8, 11, 12, 9, 10, 13, 14}));
  // A lead past every mutant: every control first.
  EXPECT_EQ(audit_judging_order(task, control, 100),
            (std::vector<std::size_t>{0, 6, 7, 11, 12, 1, 2, 3, 4, 5, 8, 9, 10, 13, 14}));
  // Any catalog: a permutation, a task's controls before its mutants, its mutants in order, and
  // `lead` mutants of earlier tasks (all there are, at the start) between the two.
  std::uint32_t seed = 20261202;
  auto next = [&] { return (seed = seed * 1664525u + 1013904223u) >> 8; };
  for (int round = 0; round < 200; ++round) {
    std::vector<std::string> t;
    std::vector<bool> c;
    const int tasks = 1 + next() % 6;
    for (int k = 0; k < tasks; ++k) {
      const int nc = 1 + next() % 2, nm = next() % 7;
      for (int j = 0; j < nc + nm; ++j) {
        t.push_back(std::to_string(k));
        c.push_back(j < nc);
      }
    }
    const std::size_t lead = next() % 5;
    const auto order = audit_judging_order(t, c, lead);
    ASSERT_EQ(order.size(), t.size());
    std::vector<std::size_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t i = 0; i < sorted.size(); ++i)
      ASSERT_EQ(sorted[i], i);
    std::map<std::string, std::size_t> first_mutant, last_mutant_index, mutants_at_control;
    std::size_t mutants_so_far = 0;
    for (std::size_t p = 0; p < order.size(); ++p) {
      const auto i = order[p];
      if (c[i]) {
        EXPECT_FALSE(first_mutant.count(t[i])) << "a control after its task's mutant";
        mutants_at_control[t[i]] = mutants_so_far;
        continue;
      }
      if (!first_mutant.count(t[i])) {
        first_mutant[t[i]] = p;
        ASSERT_TRUE(mutants_at_control.count(t[i]));
        // Mutants placed since the control: lead, or every one before the task's first.
        EXPECT_EQ(mutants_so_far - mutants_at_control[t[i]], std::min(lead, mutants_so_far))
            << t[i];
      }
      if (last_mutant_index.count(t[i])) {
        EXPECT_GT(i, last_mutant_index[t[i]]);
      }
      last_mutant_index[t[i]] = i;
      ++mutants_so_far;
    }
  }
}

TEST(audit_protocols_cli, a_control_that_does_not_compile_is_bad_input_before_any_run) {
  const auto& f = fx();
  const auto base = kg::test::scratch_dir("audit-protocols") / "broken-control";
  fs::create_directories(base / "root");
  fs::copy(f.root, base / "root", fs::copy_options::recursive);
  // The mutants still apply (the error is past every one of them); none of them compiles either.
  std::ofstream(base / "root/kernels/tasks/abs_fp32.cu", std::ios::app) << "\n#error broken\n";
  const auto r =
      fake_audit(base, {"audit", "checker", "--protocol", "all", "--catalog", f.catalog.string(),
                        "--root", (base / "root").string(), "--tasks", "abs_fp32", "--workers", "2",
                        "--out", (base / "out").string()});
  EXPECT_EQ(r.rc, exit_code::bad_input) << r.out << r.err;
  EXPECT_NE(r.err.find("a correct kernel does not compile: kernels/tasks/abs_fp32.cu"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(base / "out/verdicts.jsonl"));
  EXPECT_FALSE(fs::exists(base / "out/workers"));
}

TEST(audit_protocols_cli, a_mutant_that_does_not_compile_is_a_line_and_a_status_of_its_own) {
  const auto& f = fx();
  const auto base = kg::test::scratch_dir("audit-protocols") / "broken-mutant";
  fs::create_directories(base / "catalog");
  // The catalog with one abs_fp32 mutant's replacement broken: its batch fails, so each member
  // is compiled alone, while the judging of the others has started.
  std::string broken;
  {
    std::ofstream c(base / "catalog/catalog.jsonl");
    for (auto m : jsonl(f.catalog / "catalog.jsonl")) {
      if (broken.empty() && m.at("task") == "abs_fp32") {
        broken = m.at("id");
        m["replacement"] = m.at("original").get<std::string>() + " @@";
      }
      c << m.dump() << "\n";
    }
  }
  ASSERT_FALSE(broken.empty());
  const auto r =
      fake_audit(base, {"audit", "checker", "--protocol", "all", "--catalog",
                        (base / "catalog").string(), "--root", f.root.string(), "--tasks",
                        "abs_fp32", "--workers", "2", "--out", (base / "out").string()});
  EXPECT_EQ(r.rc, exit_code::failures) << r.out << r.err;
  EXPECT_NE(r.out.find("] " + broken + "  does not compile\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(1 mutants do not compile)"), std::string::npos) << r.out;
  std::ifstream in(base / "out/kill_matrix.json");
  const auto km = kill_matrix::from_json(nlohmann::json::parse(in));
  std::size_t judged = 0;
  for (const auto& row : km.rows()) {
    if (row.id == broken) {
      EXPECT_EQ(row.status, witness_status::compile_error);
      continue;
    }
    if (row.task != "abs_fp32" || row.status == witness_status::compile_error) continue;
    ++judged; // every other one has its verdicts (the control included)
    for (const auto& c : km.checkers())
      EXPECT_EQ(km.at(row.id, c), kill_verdict::killed) << row.id << " " << c;
  }
  EXPECT_EQ(jsonl(base / "out/verdicts.jsonl").size(), judged);
  EXPECT_EQ(judged, f.abs_mutants); // (the control and the mutants but the broken one)
}

// The stand-in answering each call with its first input (KG_FAKE_COPY_INPUT): on uniform [0, 1)
// inputs that is relu's right answer, on signed ones it is not. So for relu's control kernelbench
// and kernelbench-v0 (uniform inputs, five draws, the first shared with kbv) accept after their
// second stage, kbv passes the shared first call and rejects at its scale -1 trial (the second
// stage decides it), and sol, flashinfer and strict (signed inputs) reject at their first trial.
TEST(audit_protocols_cli, a_shared_first_call_is_judged_by_each_rule_and_the_second_stage_decides) {
  const auto& f = fx();
  const auto base = kg::test::scratch_dir("audit-protocols") / "copy-input";
  const auto r = fake_audit(base,
                            {"audit", "checker", "--protocol", "all", "--catalog",
                             f.catalog.string(), "--root", f.root.string(), "--tasks", "relu",
                             "--workers", "2", "--out", (base / "out").string()},
                            {{"KG_FAKE_COPY_INPUT", "1"}});
  EXPECT_EQ(r.rc, exit_code::failures) << r.out << r.err; // (sol, flashinfer, strict reject it)
  bool seen = false;
  for (const auto& v : jsonl(base / "out/verdicts.jsonl")) {
    if (v.at("row") != "control:kernels/tasks/relu.cu") continue;
    seen = true;
    const auto& c = v.at("checks");
    EXPECT_EQ(c.at("kernelbench").at("verdict"), "survived") << v.dump();
    EXPECT_EQ(c.at("kernelbench").at("reason"), "5 trials accepted");
    EXPECT_EQ(c.at("kernelbench-v0").at("verdict"), "survived") << v.dump();
    EXPECT_EQ(c.at("kbv").at("verdict"), "killed");
    EXPECT_NE(c.at("kbv").at("reason").get<std::string>().find("scale x-1"), std::string::npos)
        << v.dump();
    for (const char* p : {"sol", "flashinfer", "strict"}) {
      EXPECT_EQ(c.at(p).at("verdict"), "killed") << p;
      EXPECT_NE(c.at(p).at("reason").get<std::string>().find("draw 0"), std::string::npos) << p;
    }
    // Two runs: the first stage (the plan and the uniform first input set; the N(0,1) one is the
    // plan's first), then the second (kernelbench's four other draws, shared with
    // kernelbench-v0, and kbv's three other scales): 4 + 3 calls.
    EXPECT_EQ(v.at("worker_runs"), 2) << v.dump();
    EXPECT_EQ(v.at("trials_sent").get<int>() - 7,
              static_cast<int>(1 + witness_plan(load_task(f.root / "data/tasks/relu.json")).size()))
        << v.dump();
  }
  EXPECT_TRUE(seen);
}

// The stand-in computing relu itself (KG_FAKE_RELU): every candidate gives the right answer, so
// the control is accepted by every protocol after every trial, while each mutant is unwitnessed
// after its first run -- the witness plan's configurations and each protocol's first trial --
// and its other protocol trials are never sent: their verdicts would not be scored.
TEST(audit_protocols_cli, an_unwitnessed_mutant_skips_the_protocols_later_trials) {
  const auto& f = fx();
  const auto base = kg::test::scratch_dir("audit-protocols") / "relu-right";
  // Each run's first call reports 5 s, the others 0.04 s: the control's median call sets the
  // mutants' limit (50 x 0.04 = 2 s), not its slowest (250 s).
  const auto r = fake_audit(base,
                            {"audit", "checker", "--protocol", "all", "--catalog",
                             f.catalog.string(), "--root", f.root.string(), "--tasks", "relu",
                             "--workers", "2", "--out", (base / "out").string()},
                            {{"KG_FAKE_RELU", "1"}, {"KG_FAKE_CALL_SECONDS", "5,0.04"}});
  EXPECT_EQ(r.rc, exit_code::ok) << r.out << r.err;
  const auto plan = witness_plan(load_task(f.root / "data/tasks/relu.json")).size();
  int control_trials = 0, mutants = 0;
  for (const auto& v : jsonl(base / "out/verdicts.jsonl")) {
    if (v.at("row") == "control:kernels/tasks/relu.cu") {
      control_trials = v.at("trials_sent").get<int>();
      for (const auto& [name, c] : v.at("checks").items())
        EXPECT_EQ(c.at("verdict"), "survived") << name << " " << v.dump();
      EXPECT_EQ(v.at("worker_runs"), 2) << v.dump();
      continue;
    }
    ++mutants;
    EXPECT_DOUBLE_EQ(v.at("trial_limit_seconds").get<double>(), 50 * 0.04) << v.dump();
    EXPECT_EQ(v.at("worker_runs"), 1) << v.dump();
    // One run: the plan and kernelbench's first trial (shared with kernelbench-v0 and kbv; sol,
    // flashinfer and strict's first is the plan's first configuration).
    EXPECT_EQ(v.at("trials_sent").get<std::size_t>(), plan + 1) << v.dump();
    // A protocol whose trials all ran in that run is decided (accepted); kernelbench (five
    // draws) and strict (a draw per regime) are not, and stay missing, saying why.
    for (const auto& [name, c] : v.at("checks").items()) {
      const auto reason = c.at("reason").get<std::string>();
      if (c.at("verdict") == "survived") {
        EXPECT_NE(reason.find("trials accepted"), std::string::npos) << name << " " << reason;
        continue;
      }
      EXPECT_EQ(c.at("verdict"), "missing") << name << " " << v.dump();
      EXPECT_NE(reason.find("unwitnessed verdicts are never scored"), std::string::npos) << reason;
    }
    for (const char* p : {"kernelbench", "strict"})
      EXPECT_EQ(v.at("checks").at(p).at("verdict"), "missing") << p;
  }
  EXPECT_EQ(mutants, static_cast<int>(f.relu_mutants));
  EXPECT_GT(control_trials, static_cast<int>(plan + 1)); // every trial of every protocol
  for (const auto& w : jsonl(base / "out/witnesses.jsonl"))
    if (!w.at("control").get<bool>()) EXPECT_EQ(w.at("status"), "unwitnessed") << w.dump();
}

// A witness plan's added shapes that the task refuses to compute (rope's oracle needs an even
// head size D; the added tails of D = 64 and 40 are 63, 33 and 39, 9) are never run and disagree
// with no one, and the summary lists them with the oracle's reason; the candidates are judged on
// the rest of the plan. (On the H200 every candidate of rope_qwen3_fp32 was a harness fault
// before.)
TEST(audit_protocols_cli, added_shapes_the_task_refuses_are_listed_and_never_run) {
  const fs::path src = KG_SOURCE_DIR;
  const auto base = kg::test::scratch_dir("audit-protocols") / "refused";
  const auto root = base / "root";
  fs::create_directories(root / "kernels/tasks");
  fs::create_directories(root / "data/tasks");
  std::ofstream(root / "kernels/tasks/rope_qwen3_fp32.cu")
      << "#include <kg_candidate.h>\n"
         "__global__ void copyk(const float* x, float* y, long n) {\n"
         "  long i = blockIdx.x * 256L + threadIdx.x;\n"
         "  if (i < n) y[i] = x[i];\n"
         "}\n"
         "extern \"C\" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out,\n"
         "                        cudaStream_t s) {\n"
         "  long n = in[0].shape[0] * in[0].shape[1] * in[0].shape[2] * in[0].shape[3];\n"
         "  copyk<<<(n + 255) / 256, 256, 0, s>>>((const float*)in[0].data, (float*)out[0].data, "
         "n);\n"
         "  return 0;\n"
         "}\n";
  {
    std::ifstream in(src / "data/tasks/rope_qwen3_fp32.json");
    auto j = nlohmann::json::parse(in);
    j["shapes"] =
        nlohmann::json::parse(R"([{"name": "small", "dims": {"B": 1, "H": 2, "S": 5, "D": 64}},
                                   {"name": "tail", "dims": {"B": 1, "H": 1, "S": 3, "D": 40}}])");
    std::ofstream(root / "data/tasks/rope_qwen3_fp32.json") << j.dump(1) << "\n";
  }
  const auto g = run({"mutants", "generate", "--root", root.string(), "--kernels",
                      "kernels/tasks/*.cu", "--out", (base / "catalog").string()});
  ASSERT_EQ(g.rc, exit_code::ok) << g.err;
  const auto r = fake_audit(base, {"audit", "checker", "--protocol", "all", "--catalog",
                                   (base / "catalog").string(), "--root", root.string(),
                                   "--workers", "2", "--out", (base / "out").string()});
  // The stand-in's zeros are wrong for rope: the control is rejected (exit 1), but judged.
  EXPECT_EQ(r.rc, exit_code::failures) << r.out << r.err;
  EXPECT_EQ(r.err.find("D even"), std::string::npos) << r.err; // no harness fault
  witness_plan_options po;
  po.first_seed = mutant_audit_options{}.seed; // (the audit's: summary.json's first_seed)
  const auto plan = witness_plan(load_task(root / "data/tasks/rope_qwen3_fp32.json"), po);
  std::set<std::string> odd; // what the oracle refuses, from the plan's own dims
  for (const auto& c : plan)
    if (c.dims.at("D") % 2 != 0) odd.insert(c.name);
  ASSERT_FALSE(odd.empty());
  std::ifstream in(base / "out/summary.json");
  const auto s = nlohmann::json::parse(in);
  EXPECT_EQ(s.at("not_judged").at("controls"), 0);
  EXPECT_EQ(s.at("not_judged").at("mutants"), 0);
  std::set<std::string> refused;
  for (const auto& x : s.at("witness_plan").at("refused").at("rope_qwen3_fp32")) {
    refused.insert(x.at("config").get<std::string>());
    EXPECT_NE(x.at("reason").get<std::string>().find("D even"), std::string::npos) << x.dump();
  }
  EXPECT_EQ(refused, odd);
  EXPECT_NE(r.out.find("added shapes refused by the task"), std::string::npos) << r.out;
  // Every candidate judged; a refused configuration disagrees with none of them.
  std::size_t lines = 0;
  for (const auto& w : jsonl(base / "out/witnesses.jsonl")) {
    ++lines;
    const auto kills = w.at("kills").get<std::string>();
    ASSERT_EQ(kills.size(), plan.size()) << w.dump();
    for (std::size_t i = 0; i < plan.size(); ++i)
      if (odd.count(plan[i].name))
        EXPECT_EQ(kills[i], '0') << plan[i].name << " " << w.dump();
      else if (plan[i].params == "task")
        EXPECT_EQ(kills[i], '1') << plan[i].name << " " << w.dump();
  }
  EXPECT_EQ(lines, jsonl(base / "catalog/catalog.jsonl").size() + 1);
  // `audit merge` keeps each part's refused configurations and unjudged counts.
  const auto m =
      run({"audit", "merge", (base / "out").string(), "--out", (base / "merged").string()});
  EXPECT_EQ(m.rc, exit_code::failures) << m.err; // (the control is still rejected)
  std::ifstream min(base / "merged/summary.json");
  const auto ms = nlohmann::json::parse(min);
  EXPECT_EQ(ms.at("parts").at(0).at("witness_plan").at("refused"),
            s.at("witness_plan").at("refused"));
  EXPECT_EQ(ms.at("parts").at(0).at("not_judged"), s.at("not_judged"));
}
