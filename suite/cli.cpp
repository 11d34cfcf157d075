#include "suite/cli.h"

#include <charconv>
#include <cmath>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "oracles/protocol.h"
#include "reports/environment.h"
#include "reports/json_input.h"
#include "reports/json_schema.h"
#include "reports/result_schema.h"
#include "reports/result_writer.h"
#include "sandbox/worker.h"
#include "suite/audit.h"
#include "suite/audit_agreement_command.h"
#include "suite/audit_checker_command.h"
#include "suite/audit_merge_command.h"
#include "suite/compare_command.h"
#include "suite/eval_command.h"
#include "suite/exit_codes.h"
#include "suite/fastp_command.h"
#include "suite/history_command.h"
#include "suite/local_shards.h"
#include "suite/merge_command.h"
#include "suite/mutants_command.h"
#include "suite/mutants_equivalence_command.h"
#include "suite/report_command.h"
#include "suite/run_command.h"
#include "suite/slurm_command.h"
#include "suite/suite_command.h"
#include "suite/time_command.h"
#include "suite/workload_command.h"

namespace kg {
namespace {

constexpr const char* exit_codes_text =
    "exit codes: 0 ok, 1 ran with failures (errors, non-conforming file), 2 bad input,\n"
    "            3 backend unavailable, 4 internal error, 130 interrupted";

constexpr const char* decode_group = "Options of the decode workloads";

// Every command's options, filled by the parse.
struct cli_values {
  bool env_json = false, protocols_json = false;
  audit_request audit;
  time_options time;
  eval_options eval;
  std::string audit_out;
  std::uint64_t eval_seed = 0; // eval.seed, when --seed is given
  fastp_options fastp;
  workload_options workload;
  suite_options suite;
  compare_command_options compare;
  run_options run;
  mutants_options mutants;
  mutants_equivalence_options mutants_equivalence;
  audit_checker_options audit_checker;
  audit_agreement_options audit_agreement;
  audit_merge_options audit_merge;
  report_options report;
  std::string validate_file;
  history_options history;
  merge_options merge;
  slurm_options slurm;
  std::string run_gpus, checker_gpus, eval_gpus; // --gpus LIST (suite/local_shards.h)
  // --history of eval, audit and audit checker (run keeps its own in run_options).
  std::optional<std::string> eval_history, audit_history, checker_history;
};

template <class T>
std::string show(T v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// A number read whole with from_chars (no NaN or infinity, nothing after it) and kept only if
// `ok` holds; else one line naming the option and the rule.
template <class T>
CLI::Option* add_number(CLI::App* app, const std::string& name, T& target, const std::string& type,
                        std::function<bool(T)> ok, const std::string& rule,
                        const std::string& help) {
  auto* opt = app->add_option_function<std::string>(
      name,
      [&target, name, ok, rule](const std::string& s) {
        T v{};
        const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        bool good = ec == std::errc() && p == s.data() + s.size() && ok(v);
        if constexpr (std::is_floating_point_v<T>) good = good && std::isfinite(v);
        if (!good) throw CLI::ValidationError("invalid " + name + " '" + s + "' (" + rule + ")");
        target = v;
      },
      help);
  opt->type_name(type)->default_str(show(target));
  return opt;
}

// A word from a closed set.
CLI::Option* add_choice(CLI::App* app, const std::string& name, std::string& target,
                        const std::vector<std::string>& words, const std::string& help) {
  std::string type;
  for (const auto& w : words)
    type += (type.empty() ? "" : "|") + w;
  auto* opt = app->add_option(name, target, help);
  opt->check(CLI::Validator(
      [words, type](std::string& s) -> std::string {
        for (const auto& w : words)
          if (s == w) return "";
        return "invalid value '" + s + "' (" + type + ")";
      },
      "", "one_of"));
  opt->type_name(type)->default_str(target);
  return opt;
}

CLI::Option* add_text(CLI::App* app, const std::string& name, std::string& target,
                      const std::string& type, const std::string& help) {
  auto* opt = app->add_option(name, target, help);
  opt->type_name(type)->default_str(target);
  return opt;
}

template <class T>
CLI::Option* add_optional_text(CLI::App* app, const std::string& name, std::optional<T>& target,
                               const std::string& type, const std::string& help) {
  auto* opt = app->add_option_function<std::string>(
      name, [&target](const std::string& s) { target = T(s); }, help);
  opt->type_name(type);
  return opt;
}

CLI::Option* add_history_option(CLI::App* app, std::optional<std::string>& target) {
  return add_optional_text(app, "--history", target, "FILE.sqlite",
                           "also append the run to this history database (kernelgate history)");
}

void declare_env(CLI::App& app, cli_values& v) {
  auto* c = app.add_subcommand("env", "the environment every result embeds");
  c->add_flag("--json", v.env_json, "print it as JSON");
}

void declare_audit(CLI::App& app, cli_values& v) {
  auto* c = app.add_subcommand("audit", "audit a checker with mutants and correct controls");
  std::string names;
  for (auto n : audit_names())
    names += (names.empty() ? "" : ", ") + std::string(n);
  // NAME is required unless the checker subcommand is given (checked when dispatching).
  add_text(c, "name", v.audit.name, "NAME",
           "the audit (" + names + "); required but with checker, agreement or merge");
  add_choice(c, "--backend", v.audit.backend, {"cpu", "cuda"}, "where the kernels run");
  add_text(c, "--protocol", v.audit.protocol, "NAME", "the checker applied (kernelgate protocols)");
  c->add_flag("--no-progress", v.audit.no_progress, "plain lines even on a terminal");
  add_text(c, "--out", v.audit_out, "DIR", "output folder")
      ->default_str("kg-out/audit-NAME-BACKEND");
  add_history_option(c, v.audit_history);
  auto* k = c->add_subcommand("checker", "judge a checker -- an outside command or the built-in "
                                         "protocols -- on witnessed mutants and the correct "
                                         "kernels they came from");
  auto& o = v.audit_checker;
  add_text(k, "--cmd", o.cmd, "CMD",
           "an outside checker: a shell command with {task}, {candidate}, "
           "{workdir}; exit 0 accept, 1 reject");
  add_text(k, "--protocol", o.protocol, "LIST",
           "instead of --cmd: built-in protocols, NAME[,NAME...] or all (kernelgate protocols); "
           "witnesses every mutant on the GPU first");
  add_text(k, "--catalog", o.catalog, "DIR", "a mutants generate output folder")->required();
  add_text(k, "--witnesses", o.witnesses, "FILE",
           "JSON lines {id, status}: which mutants are witnessed (--cmd: required; --protocol: "
           "equivalent and compile_error mutants are skipped)");
  add_text(k, "--root", o.root, "DIR", "where the catalog's sources are")
      ->default_str("the source tree");
  add_text(k, "--tasks-dir", o.tasks_dir, "DIR", "the task files passed as {task}")
      ->default_str("ROOT/data/tasks");
  add_text(k, "--tasks", o.tasks, "REGEX", "only the tasks it matches")->default_str("every task");
  add_number<double>(
      k, "--timeout", o.timeout, "S", [](double x) { return x > 0; }, "seconds > 0",
      "limit of one checker call (--cmd) or one worker run (--protocol)")
      ->default_str("300 (--cmd), 30 (--protocol)");
  add_number<int>(
      k, "--jobs", o.jobs, "N", [](int x) { return x >= 0; }, "a whole number >= 0",
      "checker calls (--cmd) or compiles (--protocol) at once (0: every core)");
  add_number<int>(
      k, "--workers", o.workers, "N", [](int x) { return x >= 0 && x <= 16; },
      "a whole number 0..16", "--protocol: GPU worker processes at once (0: half the cores, 1..8)");
  add_number<int>(
      k, "--witness-seeds", o.witness_seeds, "N", [](int x) { return x >= 1 && x <= 16; },
      "a whole number 1..16", "--protocol: seeds per shape and regime of the witness plan");
  add_text(k, "--out", o.out, "DIR",
           "output folder (verdicts.jsonl, kill_matrix.json, report*.mutation.json, "
           "summary.json, shard.json; --protocol also witnesses.jsonl, input_suites.json); "
           "required unless --resume");
  add_text(k, "--shard", o.shard, "I/N",
           "--cmd: judge only part I of N (0-based) of the candidates; kernelgate merge puts "
           "the parts together");
  add_text(k, "--resume", o.resume, "DIR",
           "--cmd: continue the audit in DIR (a killed or requeued one): its verdicts are kept, "
           "the rest are called");
  add_number<int>(
      k, "--sample", o.sample, "N", [](int x) { return x >= 0; }, "a whole number >= 0",
      "--cmd: judge N witnessed mutants, a random sample stratified by task (every control "
      "still); the rest count as missing")
      ->default_str("0: every one");
  add_number<std::uint64_t>(
      k, "--sample-seed", o.sample_seed, "S", [](std::uint64_t) { return true; }, "a whole number",
      "--cmd: the sample's seed");
  add_text(k, "--gpus", v.checker_gpus, "LIST",
           "--cmd: one shard per GPU of this machine (0,1,2,3), run at once, then merged into "
           "--out");
  add_history_option(k, v.checker_history);
  k->add_flag("--no-progress", o.no_progress, "one line per candidate even on a terminal");
  auto* g = c->add_subcommand("agreement", "do two audited checkers give the same verdicts? "
                                           "(e.g. an outside checker against the protocol it "
                                           "models)");
  auto& a = v.audit_agreement;
  add_text(g, "first", a.first, "A", "an audit checker output folder or its kill_matrix.json")
      ->required();
  add_text(g, "second", a.second, "B", "the other folder or kill_matrix.json")->required();
  add_text(g, "--checkers", a.checkers, "NAME[,NAME]",
           "the column of A and of B (one name: both); default each side's only column");
  add_text(g, "--json", a.json, "FILE", "also write the comparison and every difference here");
  add_number<double>(
      g, "--min-agreement", a.min_agreement, "F", [](double x) { return x >= 0 && x <= 1; },
      "a fraction in [0, 1]", "exit 1 when the agreement is below this (0: never)");
  auto* m = c->add_subcommand("merge", "several audits of the built-in protocols (parts of a "
                                       "catalog, by task) as one: scores over the merged kill "
                                       "matrix, phase times summed");
  m->add_option("dirs", v.audit_merge.dirs, "the parts' output folders")
      ->type_name("DIR...")
      ->required();
  add_text(m, "--out", v.audit_merge.out, "DIR",
           "the merged folder (kill_matrix.json, summary.json, verdicts.jsonl, witnesses.jsonl)")
      ->required();
}

void declare_time(CLI::App& app, cli_values& v) {
  auto* c = app.add_subcommand("time", "time a kernel (cold, L2 flushed), optionally against "
                                       "another, with an interval");
  std::string names;
  for (const auto& n : timed_implementation_names())
    names += (names.empty() ? "" : ", ") + n;
  auto& o = v.time;
  add_text(c, "--impl", o.impl, "NAME", "the implementation timed (" + names + ")")->required();
  add_text(c, "--vs", o.vs, "NAME", "an implementation to compare with, side by side");
  add_text(c, "--clocks", o.clocks, "POLICY", "observe, require-locked or lock=MHZ");
  add_choice(c, "--backend", o.backend, {"auto", "events", "graph", "cupti", "counters"},
             "how the GPU time is read");
  add_text(c, "--shape", o.shape, "RxC", "rows x columns");
  add_choice(c, "--dtype", o.dtype, {"float32", "float16"}, "element type");
  add_number<double>(
      c, "--min-effect", o.min_effect, "F", [](double x) { return x >= 0 && x < 1; },
      "a fraction in [0, 1)", "smallest speedup that counts (fraction)");
  add_text(c, "--out", o.out, "DIR", "output folder")->default_str("kg-out/time-IMPL");
  c->add_flag("--no-progress", o.no_progress, "plain lines even on a terminal");
}

void declare_eval(CLI::App& app, cli_values& v) {
  auto* c = app.add_subcommand("eval", "compile and run every (task, candidate) pair in a "
                                       "sandboxed worker, check it, time a passing one");
  auto& o = v.eval;
  o.baselines = default_baselines_dir();
  add_text(c, "--tasks", o.tasks, "GLOB", "task JSON files")->required();
  add_text(c, "--candidates", o.candidates, "DIR", "DIR/TASK.cu or DIR/TASK/NAME.cu candidates")
      ->required();
  add_text(c, "--protocol", o.protocol, "NAME",
           "strict, or a peer's checker (kernelgate protocols)");
  add_number<int>(
      c, "--trials", o.trials, "N", [](int x) { return x >= 1; }, "a whole number >= 1",
      "draws per shape (at least one per input regime)");
  add_number<std::uint64_t>(
      c, "--seed", v.eval_seed, "N", [](std::uint64_t) { return true; },
      "a whole number in [0, 2^64)", "reproduce a run (default: a secret seed from the OS)")
      ->default_str("secret");
  add_number<double>(
      c, "--timeout", o.timeout, "S", [](double x) { return x > 0; }, "seconds > 0",
      "limit of each worker request");
  add_number<int>(
      c, "--jobs", o.jobs, "N", [](int x) { return x >= 0; }, "a whole number >= 0",
      "compile parallelism (0: every core)");
  add_number<int>(
      c, "--workers", o.workers, "N", [](int x) { return x >= 0; }, "a whole number >= 0",
      "worker threads (0: a quarter of the cores, 1 to 4)");
  add_text(c, "--cache", o.cache, "DIR", "compile cache")->default_str("~/.cache/kernelgate");
  add_choice(c, "--time", o.time, {"yes", "no"}, "time passing candidates");
  add_number<double>(
      c, "--time-budget", o.time_budget, "S", [](double x) { return x > 0; }, "seconds > 0",
      "cap of each timing phase");
  add_text(c, "--baselines", o.baselines, "DIR", "the kernels timed against")
      ->default_str("kernels/tasks");
  add_text(c, "--scratch", o.scratch, "DIR", "trial tensors")
      ->default_str("/dev/shm, else OUT/work");
  add_text(c, "--out", o.out, "DIR", "output folder");
  add_text(c, "--kernelbench", o.kernelbench, "FILE",
           "also write KernelBench's eval_results.json layout");
  add_choice(c, "--torch-time", o.torch_time, {"cached", "fresh", "no"},
             "time the LibTorch reference on the GPU");
  add_text(c, "--shard", o.shard, "I/N",
           "evaluate only part I of N (0-based) of the pairs (needs --seed); kernelgate merge "
           "puts the parts together");
  add_text(c, "--resume", o.resume, "DIR",
           "continue the evaluation in DIR (needs its --seed): recorded pairs are kept");
  add_text(c, "--gpus", v.eval_gpus, "LIST",
           "one part per GPU of this machine (0,1,2,3), run at once, then merged into --out");
  add_history_option(c, v.eval_history);
  c->add_flag("--no-progress", o.no_progress, "one line per pair even on a terminal");
}

void declare_fastp(CLI::App& app, cli_values& v) {
  auto* c = app.add_subcommand("fastp", "strict fast_p over intended and aligned tasks, with "
                                        "intervals, noise-aware counts and near-ties");
  auto& o = v.fastp;
  c->add_option_function<std::string>(
       "result", [&o](const std::string& s) { o.result = s; },
       "a kernelgate eval result.json, or KernelBench's eval_results.json (with --baseline)")
      ->type_name("RESULT")
      ->required();
  add_optional_text(c, "--baseline", o.baseline, "FILE", "KernelBench's baseline_time_torch.json");
  c->add_option_function<std::string>(
       "--level",
       [&o](const std::string& s) {
         int level = 0;
         const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), level);
         if (ec != std::errc() || p != s.data() + s.size() || level < 1)
           throw CLI::ValidationError("invalid --level '" + s +
                                      "' (a KernelBench level: 1, 2, 3, 4)");
         o.level = level;
       },
       "KernelBench level of the result")
      ->type_name("N");
  c->add_option_function<std::string>(
       "--dataset",
       [&o](const std::string& s) {
         if (!std::filesystem::is_directory(s))
           throw CLI::ValidationError("--dataset '" + s + "' is not a folder (KernelBench/levelN)");
         o.dataset = s;
       },
       "KernelBench/levelN, to count the intended tasks")
      ->type_name("DIR");
  c->add_option_function<std::string>(
       "--p",
       [&o](const std::string& s) {
         try {
           o.p = parse_p_list(s);
         } catch (const std::invalid_argument& e) {
           throw CLI::ValidationError(e.what());
         }
       },
       "speedup thresholds")
      ->type_name("LIST")
      ->default_str("0,0.5,0.8,1,1.5,2");
  add_number<double>(
      c, "--min-effect", o.min_effect, "F", [](double x) { return x >= 0 && x < 1; },
      "a fraction in [0, 1)", "smallest speedup that counts (fraction)");
  add_optional_text(c, "--candidate", o.candidate, "NAME", "score one candidate only");
  c->add_flag("--json", o.json, "print the scores as JSON");
  add_optional_text(c, "--out", o.out, "DIR", "also write a fastp result here");
}

void declare_workload(CLI::App& app, cli_values& v) {
  auto* c = app.add_subcommand("workload", "the workloads of the Qwen3-4B stack");
  c->require_subcommand(1);
  c->add_subcommand("list", "list the workloads");
  auto* run = c->add_subcommand("run", "run a workload: metrics with intervals, gate verdicts, "
                                       "a workload result");
  auto& o = v.workload;
  add_text(run, "id", o.id, "ID", "the workload (kernelgate workload list)")->required();
  add_choice(run, "--device", o.device, {"cpu", "cuda"}, "where it runs");
  add_number<int>(
      run, "--steps", o.steps, "N", [](int x) { return x >= 2 && x <= 100000; },
      "a whole number 2..100000", "training or decode steps");
  add_number<int>(
      run, "--jobs", o.jobs, "N", [](int x) { return x >= 0 && x <= 16; }, "a whole number 0..16",
      "CPU threads (0: the default)");
  add_text(run, "--out", o.out, "DIR", "output folder");
  auto decode_only = [](CLI::Option* opt) { opt->group(decode_group); };
  decode_only(add_number<double>(
      run, "--start-rps", o.start_rps, "R", [](double x) { return x > 0; }, "a number > 0",
      "first load tried, requests/s"));
  decode_only(add_number<double>(
      run, "--trace-seconds", o.trace_seconds, "S", [](double x) { return x > 0; }, "a number > 0",
      "length of each arrival trace"));
  decode_only(add_number<int>(
      run, "--max-load-steps", o.max_load_steps, "N", [](int x) { return x >= 1 && x <= 200; },
      "a whole number 1..200", "loads tried at most (5% apart)"));
  decode_only(add_number<double>(
      run, "--itl-limit-ms", o.itl_limit_ms, "L", [](double x) { return x > 0; }, "a number > 0",
      "inter-token latency gate, ms (p99)"));
  decode_only(add_number<int>(
      run, "--repeats", o.repeats, "R", [](int x) { return x >= 2 && x <= 100; },
      "a whole number 2..100", "traces at each found load (bootstrap)"));
}

void declare_compare(CLI::App& app, cli_values& v) {
  auto* c = app.add_subcommand("compare", "compare two suite runs workload by workload: FASTER, "
                                          "SLOWER, SAME or AMBIGUOUS, gate changes, missing "
                                          "workloads");
  auto& o = v.compare;
  // BASE NEW, or NEW alone with --baseline-from (checked when dispatching).
  add_text(c, "base", o.base, "BASE",
           "the earlier run: a kernelgate run folder or its result.json (required unless "
           "--baseline-from)");
  add_text(c, "new", o.next, "NEW", "the run judged against BASE (folder or result.json)");
  add_optional_text(c, "--baseline-from", o.baseline_from, "FILE.sqlite",
                    "instead of BASE: the last run of NEW's suite in this history that completed "
                    "with every gate passing");
  add_optional_text(c, "--baseline-rev", o.baseline_rev, "REV",
                    "with --baseline-from: the last run of NEW's suite at this git revision "
                    "(a prefix)");
  add_number<double>(
      c, "--min-effect", o.min_effect, "F", [](double x) { return x >= 0 && x < 1; },
      "a fraction in [0, 1)", "smallest change that counts (fraction)");
  c->add_flag("--allow-env-change", o.allow_env_change,
              "compare runs whose GPU, driver or clocks differ (the differences are listed)");
  add_optional_text(c, "--out", o.out, "DIR", "also write a compare result here");
  c->add_flag("--json", o.json, "print the comparison as JSON");
}

void declare_run(CLI::App& app, cli_values& v) {
  auto* c = app.add_subcommand("run", "run a regression suite on the GPU: every workload's "
                                      "samples, median with its 95% interval, % of SOL and "
                                      "gates, streamed to a run folder");
  auto& o = v.run;
  add_text(c, "--suite", o.suite, "NAME|FILE", "nightly, smoke (kernelgate suite list) or a file")
      ->required();
  add_text(c, "--filter", o.filter, "REGEX", "only the workloads whose id matches");
  add_text(c, "--out", o.out, "DIR", "run folder (default kg-out/run-SUITE)");
  add_text(c, "--resume", o.resume, "DIR",
           "continue a killed run in DIR: finished workloads are kept, the rest run");
  add_number<int>(
      c, "--repeats", o.repeats, "N", [](int x) { return x >= 1 && x <= 20; },
      "a whole number 1..20", "multiply every workload's samples");
  add_text(c, "--clocks", o.clocks, "POLICY", "observe, require-locked or lock=MHZ");
  add_text(c, "--warm-from", o.warm_from, "RUN",
           "replay a finished run's serving warm-up models (a nightly against its baseline)");
  c->add_flag("--no-progress", o.no_progress, "one line per workload even on a terminal");
  add_history_option(c, o.history);
  c->add_flag("--dry-run", o.list_only, "print the run order and expected time, run nothing");
  add_text(c, "--shard", o.shard, "I/N",
           "run only part I of N (0-based) of the suite, split by expected cost; "
           "kernelgate merge puts the parts together");
  add_text(c, "--gpus", v.run_gpus, "LIST",
           "one shard per GPU of this machine (0,1,2,3), run at once, then merged into --out");
  add_text(c, "--costs-from", o.costs_from, "RUN",
           "with --shard: split by a finished run's measured workload and set-up times");
  c->add_option("--override", o.overrides,
                "ROLE=FILE.cu: your kernel for a role (gemv.qkv, gemv.o_proj, gemv.gate_up, "
                "gemv.down, gemv.lm_head), checked against its fp64 oracle first")
      ->type_name("ROLE=FILE")
      ->allow_extra_args(false);
}

void declare_suite(CLI::App& app, cli_values& v) {
  auto* c = app.add_subcommand("suite", "the regression suites (data/suites) and their workloads");
  c->require_subcommand(1);
  c->add_subcommand("list", "list the suites with their workload counts and expected times");
  auto* show = c->add_subcommand("show", "a suite's workloads in run order: id, level, set-up, "
                                         "metric, SOL bound, expected seconds");
  auto& o = v.suite;
  add_text(show, "suite", o.suite, "NAME|FILE", "a suite (kernelgate suite list) or a suite file")
      ->required();
  add_text(show, "--filter", o.filter, "REGEX",
           "only the workloads whose id matches (ECMAScript, searched)");
  show->add_flag("--markdown", o.markdown, "print docs/suites.md's table");
  show->add_flag("--json", o.json, "print the suite with its workloads resolved");
}

void declare_mutants(CLI::App& app, cli_values& v) {
  auto* c = app.add_subcommand("mutants", "source-level mutants of CUDA kernels, the faults a "
                                          "checker audit feeds its checker");
  c->require_subcommand(1);
  auto* gen = c->add_subcommand("generate", "write the mutant catalog of CUDA kernels (every "
                                            "rule, every site), without compiling");
  auto& o = v.mutants;
  gen->add_option("--kernels", o.kernels,
                  "CUDA sources under --root: a glob or a folder (every .cu below it); "
                  "repeatable")
      ->type_name("GLOB")
      ->default_str("kernels/tasks/*.cu kernels/variants/**/*.cu")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
  add_text(gen, "--root", o.root, "DIR", "where globs start; catalog paths are relative to it")
      ->default_str("the source tree");
  add_text(gen, "--out", o.out, "DIR", "output folder (catalog.jsonl, summary.json)")->required();
  gen->add_flag("--no-progress", o.no_progress, "one line per file even on a terminal");
  auto* eq = c->add_subcommand("equivalence", "mark the mutants whose cubin equals the "
                                              "original's (compiled with nvcc, no GPU)");
  auto& e = v.mutants_equivalence;
  add_text(eq, "--catalog", e.catalog, "DIR", "a mutants generate output folder")->required();
  add_text(eq, "--root", e.root, "DIR", "where the catalog's paths are")
      ->default_str("the source tree");
  add_text(eq, "--tasks", e.tasks, "REGEX", "only mutants of the tasks it matches")
      ->default_str("every task");
  add_number<int>(
      eq, "--jobs", e.jobs, "N", [](int x) { return x >= 0; }, "a whole number >= 0",
      "parallel compiles (0: every core)");
  add_text(eq, "--out", e.out, "DIR", "output folder (equivalence.jsonl, summary.json)")
      ->required();
  eq->add_flag("--no-progress", e.no_progress, "one line per compile even on a terminal");
}

void declare_history(CLI::App& app, cli_values& v) {
  auto* c = app.add_subcommand("history", "the runs a history database holds: per workload the "
                                          "trend of its metric, the runs SLOWER than the run "
                                          "before, the builds");
  auto& o = v.history;
  add_text(c, "file", o.file, "FILE", "a history database (run, eval and audit append to one)")
      ->required();
  add_optional_text(c, "--workload", o.workload, "ID", "one workload's (or record's) every run");
  add_optional_text(c, "--since", o.since, "DATE",
                    "only runs created from then on (UTC: 2026-12-01 or 2026-12-01T08:00:00Z)");
  c->add_flag("--json", o.json, "print it as JSON");
  add_optional_text(c, "--append", o.append, "RESULT",
                    "instead: append a finished run (a result.json or its folder) to FILE");
}

void declare_protocols(CLI::App& app, cli_values& v) {
  auto* c = app.add_subcommand("protocols", "the checking protocols and the peers they model");
  c->add_flag("--json", v.protocols_json, "print them as JSON");
}

void declare_report(CLI::App& app, cli_values& v) {
  auto* c = app.add_subcommand("report", "one self-contained HTML page of results (suite run, "
                                         "compare, eval, fastp, audit): summary, environment, "
                                         "tables and SVG plots");
  auto& o = v.report;
  c->add_option("results", o.results, "result.json files or run folders, shown in order")
      ->type_name("RESULT...")
      ->required();
  add_optional_text(c, "--baseline", o.baseline, "RESULT",
                    "a suite run each suite run is compared with (forest plot, decisions)");
  add_optional_text(
      c, "--history", o.history, "FILE.sqlite",
      "a run history (kernelgate history): trend lines of each suite run's workloads");
  add_text(c, "--html", o.html, "OUT.html", "the page written (temporary file + rename)")
      ->required();
}

void declare_merge(CLI::App& app, cli_values& v) {
  auto* c = app.add_subcommand("merge", "put the shards of one run or checker audit back "
                                        "together: one result, every missing item named");
  c->add_option("dirs", v.merge.dirs, "the shard folders (each with its shard.json)")
      ->type_name("DIR...")
      ->required();
  add_text(c, "--out", v.merge.out, "DIR", "the merged result's folder")->required();
  add_text(c, "--logs", v.merge.logs, "DIR",
           "where the shards' logs are (shard-I.log): a missing shard's log tail is reported");
}

void declare_slurm(CLI::App& app, cli_values& v) {
  auto* c = app.add_subcommand("slurm", "run a long command as a Slurm array of shards and a "
                                        "merge job; the state of such an array");
  auto& o = v.slurm;
  auto* s = c->add_subcommand("submit", "write and submit the sbatch array (one shard a task, "
                                        "GPUs through GRES, requeued when preempted) and its "
                                        "merge job (afterany)");
  add_number<int>(
      s, "--shards", o.shards, "N", [](int x) { return x >= 1 && x <= 4096; },
      "a whole number 1..4096", "array tasks, one shard each")
      ->required();
  add_number<int>(
      s, "--gpus-per-shard", o.gpus_per_shard, "G", [](int x) { return x >= 0 && x <= 64; },
      "a whole number 0..64", "GPUs per task (GRES gpu:G); 0 asks for none");
  add_text(s, "--partition", o.partition, "P", "sbatch --partition");
  add_text(s, "--time", o.time, "T", "sbatch --time of each shard");
  add_text(s, "--account", o.account, "A", "sbatch --account");
  s->add_flag("--dry-run", o.dry_run, "print the two scripts, submit nothing");
  s->add_option("command", o.command,
                "after the separator: the kernelgate command line to shard (run ... or audit "
                "checker with a checker command), with its output folder")
      ->type_name("-- COMMAND...")
      ->required();
  auto* st = c->add_subcommand("status", "an array's tasks: done, running, pending, failed, "
                                         "with each failed task's log tail");
  add_text(st, "job", o.job, "JOBID", "the array job id (slurm submit prints it)")->required();
}

void declare_validate(CLI::App& app, cli_values& v) {
  auto* c = app.add_subcommand("validate", "check a result file against the result schema");
  add_text(c, "file", v.validate_file, "FILE", "a result.json")->required();
}

std::unique_ptr<CLI::App> make_app(cli_values& v) {
  auto app = std::make_unique<CLI::App>(
      "kernelgate: measures GPU kernels and audits the checkers that judge them", "kernelgate");
  app->footer(exit_codes_text);
  // As the hand parsers did: an option given twice keeps its last value.
  app->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app->require_subcommand(1);
  app->set_help_all_flag("--help-all", "every command's options");
  declare_env(*app, v);
  declare_audit(*app, v);
  declare_time(*app, v);
  declare_eval(*app, v);
  declare_fastp(*app, v);
  declare_workload(*app, v);
  declare_run(*app, v);
  declare_suite(*app, v);
  declare_compare(*app, v);
  declare_history(*app, v);
  declare_report(*app, v);
  declare_mutants(*app, v);
  declare_protocols(*app, v);
  declare_merge(*app, v);
  declare_slurm(*app, v);
  declare_validate(*app, v);
  app->add_subcommand("help", "this text; `kernelgate help COMMAND` for a command's");
  // Words no command declares are kept, not thrown: kernelgate names them itself (extra_word).
  std::function<void(CLI::App&)> keep_extras = [&](CLI::App& a) {
    a.allow_extras();
    for (auto* sub : a.get_subcommands([](CLI::App*) { return true; }))
      keep_extras(*sub);
  };
  keep_extras(*app);
  return app;
}

int cmd_env(const cli_values& v, std::ostream& out) {
  const auto env = collect_environment();
  if (v.env_json)
    out << env.dump(2) << "\n";
  else
    out << format_environment(env);
  return exit_code::ok;
}

int cmd_protocols(const cli_values& v, std::ostream& out) {
  nlohmann::json all = nlohmann::json::array();
  for (auto n : protocol_names())
    all.push_back(find_protocol(n)->to_json());
  if (v.protocols_json) {
    out << all.dump(2) << "\n";
  } else {
    for (const auto& p : all)
      out << p["name"].get<std::string>() << " -- " << p["models"].get<std::string>() << "\n  "
          << p["notes"].get<std::string>() << "\n";
  }
  return exit_code::ok;
}

int cmd_validate(const std::string& file, std::ostream& out, std::ostream& err) {
  nlohmann::json doc;
  try {
    doc = read_json_file_checked(file);
  } catch (const json_input_error& e) {
    err << "kernelgate: " << printable(e.what(), 400) << "\n";
    return exit_code::bad_input;
  }
  const auto errors = validate_json(nlohmann::json::parse(result_schema_text()), doc);
  if (errors.empty()) {
    out << file << ": valid " << doc.value("schema", "?") << " ("
        << (doc.contains("records") ? doc["records"].size() : 0) << " records)\n";
    return exit_code::ok;
  }
  for (const auto& e : errors)
    err << printable(file) << ": " << printable(e.path) << ": " << printable(e.message, 400)
        << "\n";
  return exit_code::failures;
}

// Internal: the sandbox runs candidates as `kernelgate worker MANIFEST`, and `kernelgate eval`
// keeps workers as `kernelgate worker --serve REQUEST_FD REPLY_FD`. Not a user's command, so not
// declared with the others (and not in --help).
int cmd_worker(const std::vector<std::string>& args, std::ostream& err) {
  if (args.size() == 3) return run_worker(args[2]);
  int fds[2] = {-1, -1};
  if (args.size() == 5 && args[2] == "--serve") {
    for (int k = 0; k < 2; ++k) {
      const auto& a = args[3 + static_cast<std::size_t>(k)];
      const auto [p, ec] = std::from_chars(a.data(), a.data() + a.size(), fds[k]);
      if (ec != std::errc() || p != a.data() + a.size() || fds[k] < 0) fds[k] = -1;
    }
    if (fds[0] >= 0 && fds[1] >= 0) return run_worker_serve(fds[0], fds[1]);
  }
  err << "kernelgate: worker (internal) takes MANIFEST, or --serve REQUEST_FD REPLY_FD\n";
  return exit_code::bad_input;
}

// A result.json in the output folder is always this run's: an old one goes before any check of
// the options or inputs, so a run that stops early leaves none behind.
std::string remove_stale_results(const std::vector<std::string>& args) {
  for (std::size_t i = 2; i < args.size(); ++i) {
    std::string dir;
    if (args[i] == "--out" && i + 1 < args.size())
      dir = args[i + 1];
    else if (args[i].rfind("--out=", 0) == 0)
      dir = args[i].substr(6);
    else
      continue;
    if (auto why = remove_stale_result(dir); !why.empty()) return why;
  }
  return "";
}

std::vector<const CLI::App*> commands_of(const CLI::App& c) {
  return c.get_subcommands([](const CLI::App*) { return true; });
}

bool is_flag(const CLI::Option* o) {
  return o->get_type_name().empty();
}

bool is_help(const CLI::Option* o) {
  return o->get_name() == "--help" || o->get_name() == "--help-all";
}

// The first word the parsed commands did not take, and the command it was given to.
std::optional<std::pair<std::string, std::string>> extra_word(const CLI::App& app) {
  std::string path;
  for (const CLI::App* a = &app; a;) {
    for (const auto& word : a->remaining())
      if (word != "--") return std::make_pair(word, path); // (CLI11 keeps the separator)
    const auto subs = a->get_subcommands();
    a = subs.empty() ? nullptr : subs.front();
    if (a) path += (path.empty() ? "" : " ") + a->get_name();
  }
  return std::nullopt;
}

// "eval", "workload run": the commands the parse reached.
std::string command_path(const CLI::App& app) {
  std::string path;
  for (const CLI::App* a = &app;;) {
    const auto subs = a->get_subcommands();
    if (subs.empty()) return path;
    a = subs.front();
    path += (path.empty() ? "" : " ") + a->get_name();
  }
}

const CLI::App* find_command(const CLI::App& app, const std::string& path) {
  std::istringstream words(path);
  const CLI::App* a = &app;
  for (std::string w; words >> w;) {
    const CLI::App* next = nullptr;
    for (const auto* s : commands_of(*a))
      if (s->get_name() == w) next = s;
    if (!next) return nullptr;
    a = next;
  }
  return a;
}

// The database a command appends its run to, when --history is given.
const std::optional<std::string>* history_of(const std::string& path, const cli_values& v) {
  if (path == "run" && !v.run.list_only) return &v.run.history;
  if (path == "eval") return &v.eval_history;
  if (path == "audit") return &v.audit_history;
  if (path == "audit checker") return &v.checker_history;
  return nullptr;
}

// A command that ran to the end (exit 0 or 1) has its result appended; an append that fails
// turns the exit code into 2, the result file kept.
template <class Append>
int then_append(int rc, Append append) {
  if (rc != exit_code::ok && rc != exit_code::failures) return rc;
  const int h = append();
  return h ? h : rc;
}

int run_parsed(const CLI::App& app, cli_values& v, const std::vector<std::string>& args,
               std::ostream& out, std::ostream& err) {
  const std::string path = command_path(app);
  if (const auto* h = history_of(path, v); h && *h)
    if (const int rc = prepare_history(**h, err)) return rc;
  if (path == "history") return run_history_command(v.history, out, err);
  if (path == "env") return cmd_env(v, out);
  if (path == "protocols") return cmd_protocols(v, out);
  if (path == "validate") return cmd_validate(v.validate_file, out, err);
  if ((path == "run" && !v.run_gpus.empty()) || (path == "eval" && !v.eval_gpus.empty()) ||
      (path == "audit checker" && !v.checker_gpus.empty()))
    return run_local_shards(args, out, err);
  if (path == "slurm submit") return run_slurm_submit(v.slurm, out, err);
  if (path == "slurm status") return run_slurm_status(v.slurm, out, err);
  if (path == "audit checker") {
    const auto& o = v.audit_checker;
    const std::string checker = o.cmd.empty() ? "protocol:" + o.protocol : o.cmd;
    return then_append(run_audit_checker_command(o, out, err), [&] {
      return append_audit_checker_to_history(v.checker_history, o.out, checker, args, out, err);
    });
  }
  if (path == "audit agreement")
    return run_audit_agreement_command(v.audit_agreement, out, err);
  if (path == "audit merge") return run_audit_merge_command(v.audit_merge, out, err);
  if (path == "audit" && v.audit.name.empty()) {
    err << "kernelgate: audit: NAME is required (or: audit checker --cmd ... | --protocol ...)\n";
    return exit_code::bad_input;
  }
  if (path == "audit") {
    v.audit.argv = args;
    v.audit.out = v.audit_out.empty() ? std::filesystem::path("kg-out") /
                                            ("audit-" + v.audit.name + "-" + v.audit.backend)
                                      : std::filesystem::path(v.audit_out);
    return then_append(run_audit(v.audit, out, err), [&] {
      return append_to_history_if_asked(v.audit_history, v.audit.out / "result.json", out, err);
    });
  }
  if (path == "time") return run_time_command(v.time, args, out, err);
  if (path == "eval") {
    if (find_command(app, "eval")->count("--seed")) v.eval.seed = v.eval_seed;
    return then_append(run_eval_command(v.eval, args, out, err), [&] {
      return append_to_history_if_asked(
          v.eval_history,
          std::filesystem::path(v.eval.resume.empty() ? v.eval.out : v.eval.resume) / "result.json",
          out, err);
    });
  }
  if (path == "fastp") return run_fastp_command(v.fastp, args, out, err);
  if (path == "run") return run_suite_command(v.run, args, out, err);
  if (path == "compare") return run_compare_command(v.compare, args, out, err);
  if (path == "merge") return run_merge_command(v.merge, args, out, err);
  if (path == "report") return run_report_command(v.report, out, err);
  if (path == "suite list") return run_suite_list_command(v.suite, out, err);
  if (path == "mutants generate") return run_mutants_generate_command(v.mutants, out, err);
  if (path == "mutants equivalence")
    return run_mutants_equivalence_command(v.mutants_equivalence, out, err);
  if (path == "suite show") return run_suite_show_command(v.suite, out, err);
  if (path == "workload list") {
    print_workload_list(out);
    return exit_code::ok;
  }
  if (path == "workload run") {
    for (const auto* o : find_command(app, path)->get_options())
      if (o->get_group() == decode_group && o->count())
        v.workload.decode_options_given.push_back(o->get_name());
    return run_workload_command(v.workload, args, out, err);
  }
  err << "kernelgate: internal error: no handler for '" << path << "'\n";
  return exit_code::internal;
}

// `kernelgate help [COMMAND...]`, `kernelgate help --markdown`.
int cmd_help(const CLI::App& app, const std::vector<std::string>& args, std::ostream& out,
             std::ostream& err) {
  if (args.size() == 3 && args[2] == "--markdown") {
    out << cli_reference_markdown();
    return exit_code::ok;
  }
  std::string path;
  for (std::size_t i = 2; i < args.size(); ++i)
    path += (path.empty() ? "" : " ") + args[i];
  const CLI::App* c = find_command(app, path);
  if (!c) {
    err << "kernelgate: no command '" << printable(path) << "' (kernelgate --help)\n";
    return exit_code::bad_input;
  }
  out << c->help();
  return exit_code::ok;
}

// "kernelgate eval --tasks GLOB [--trials N] ...": required items bare, the others bracketed.
// A command with options of its own and subcommands (audit NAME, audit checker) gets two lines.
std::string synopsis_of(const CLI::App& c, const std::string& path) {
  const std::string head = "kernelgate " + path;
  std::string s = head;
  for (const auto* o : c.get_options()) {
    if (is_help(o)) continue;
    std::string item = o->get_positional() ? o->get_type_name() : o->get_name();
    if (!o->get_positional() && !is_flag(o)) item += " " + o->get_type_name();
    s += " " + (o->get_required() ? item : "[" + item + "]");
  }
  if (const auto subs = commands_of(c); !subs.empty()) {
    std::string words;
    for (const auto* x : subs)
      words += (words.empty() ? "" : "|") + x->get_name();
    const std::string sub = head + " {" + words + "} ...";
    return s == head ? sub : s + "\n" + sub;
  }
  return s;
}

void describe(const CLI::App& c, const std::string& path, std::vector<command_help>& all) {
  const auto subs = commands_of(c);
  if (!path.empty() && path != "help") {
    command_help h;
    h.path = path;
    h.summary = c.get_description();
    h.synopsis = synopsis_of(c, path);
    h.help = c.help();
    for (const auto* o : c.get_options()) {
      if (is_help(o)) continue;
      h.options.push_back({o->get_positional() ? o->get_type_name() : o->get_name(),
                           o->get_positional() || is_flag(o) ? "" : o->get_type_name(),
                           o->get_default_str(), o->get_description(), o->get_required(),
                           o->get_positional()});
    }
    all.push_back(std::move(h));
  }
  for (const auto* s : subs)
    describe(*s, path.empty() ? s->get_name() : path + " " + s->get_name(), all);
}

} // namespace

std::vector<command_help> describe_commands() {
  cli_values v;
  const auto app = make_app(v);
  std::vector<command_help> all;
  describe(*app, "", all);
  return all;
}

std::string cli_reference_markdown(const command_help& h) {
  std::ostringstream s;
  s << "```\n" << h.synopsis << "\n```\n\n" << h.summary << ".\n";
  if (h.options.empty()) return s.str();
  s << "\n| option | value | default | meaning |\n|---|---|---|---|\n";
  auto cell = [](std::string t) {
    for (std::size_t i = 0; (i = t.find('|', i)) != std::string::npos; i += 2)
      t.replace(i, 1, "\\|");
    return t;
  };
  auto code = [&](const std::string& t) { return t.empty() ? t : "`" + cell(t) + "`"; };
  for (const auto& o : h.options)
    s << "| `" << o.name << "` | " << code(o.value) << " | "
      << (o.required ? "required" : code(o.default_value)) << " | " << cell(o.description)
      << " |\n";
  return s.str();
}

std::string cli_reference_markdown() {
  std::string all;
  for (const auto& h : describe_commands())
    all += "<!-- kernelgate help --markdown: " + h.path + " -->\n" + cli_reference_markdown(h) +
           "<!-- end -->\n\n";
  return all;
}

int kernelgate_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  cli_values v;
  const auto app = make_app(v);
  if (args.size() < 2) {
    err << app->help();
    return exit_code::bad_input;
  }
  if (args[1] == "worker") return cmd_worker(args, err);
  if (args[1] == "help") return cmd_help(*app, args, out, err);
  if (args[1].rfind("-", 0) != 0 && !find_command(*app, args[1])) {
    err << "kernelgate: unknown command '" << printable(args[1]) << "' (kernelgate --help)\n";
    return exit_code::bad_input;
  }
  // (compare removes its own, after making sure --out is not one of the runs it reads)
  if (const auto why = args[1] == "compare" ? "" : remove_stale_results(args); !why.empty()) {
    err << "kernelgate: " << printable(why) << "\n";
    return exit_code::bad_input;
  }
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend() - 1); // CLI11 pops from the back
    try {
      app->parse(reversed);
    } catch (const CLI::CallForHelp&) {
      const std::string path = command_path(*app);
      out << (path.empty() ? app->help() : find_command(*app, path)->help());
      return exit_code::ok;
    } catch (const CLI::CallForAllHelp&) {
      out << app->help("", CLI::AppFormatMode::All);
      return exit_code::ok;
    } catch (const CLI::ParseError& e) {
      const std::string path = command_path(*app);
      err << "kernelgate: " << (path.empty() ? "" : path + ": ") << printable(e.what(), 400)
          << " (kernelgate " << (path.empty() ? "" : path + " ") << "--help)\n";
      return exit_code::bad_input;
    }
    if (const auto extra = extra_word(*app)) {
      const auto& [word, path] = *extra;
      err << "kernelgate: " << (path.empty() ? "" : path + ": ")
          << (word.rfind("-", 0) == 0 && word.size() > 1 ? "unknown option '"
                                                         : "unexpected argument '")
          << printable(word) << "' (kernelgate " << (path.empty() ? "" : path + " ") << "--help)\n";
      return exit_code::bad_input;
    }
    return run_parsed(*app, v, args, out, err);
  } catch (const std::exception& e) {
    err << "kernelgate: internal error: " << printable(e.what(), 400) << "\n";
    return exit_code::internal;
  }
}

} // namespace kg
