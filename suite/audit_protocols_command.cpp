#include "suite/audit_protocols_command.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iomanip>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/printable.h"
#include "gpu/device_info.h"
#include "mutants/input_suite.h"
#include "reports/environment.h"
#include "reports/mutation_report.h"
#include "reports/remove_tree.h"
#include "reports/result_writer.h"
#include "sandbox/candidate_batch.h"
#include "sandbox/mutant_audit.h"
#include "sandbox/sandbox.h"
#include "sandbox/worker_sync.h"
#include "suite/audit_inputs.h"
#include "suite/audit_scores.h"
#include "suite/exit_codes.h"
#include "suite/progress_meter.h"
#include "suite/task_catalog.h"
#include "suite/worker_paths.h"
#include "timing/interrupt.h"
#include "timing/phase_log.h"
#include "workloads/witness_plan.h"

namespace kg {

namespace fs = std::filesystem;

namespace {

int bad_input(std::ostream& err, const std::string& why) {
  err << "kernelgate: audit checker: " << printable(why, 600) << "\n";
  return exit_code::bad_input;
}

std::string one_line_of(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s.size() > 300 ? s.substr(0, 300) + "..." : s;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// --protocol's list: "all", or names `kernelgate protocols` knows, comma-separated.
std::string parse_protocols(const std::string& text, std::vector<protocol>& out) {
  std::vector<std::string> names;
  if (text == "all") {
    for (const auto n : protocol_names())
      names.emplace_back(n);
  } else {
    std::stringstream s(text);
    for (std::string n; std::getline(s, n, ',');)
      names.push_back(n);
  }
  std::set<std::string> seen;
  for (const auto& n : names) {
    const auto p = find_protocol(n);
    if (!p) return "unknown protocol '" + n + "' (kernelgate protocols lists them)";
    if (!seen.insert(n).second) return "protocol '" + n + "' given twice";
    out.push_back(*p);
  }
  if (out.empty()) return "--protocol names no protocol";
  return "";
}

// One candidate of the audit: a mutant, or a correct kernel of the task (a control).
struct candidate {
  std::string row; // the kill matrix row: a mutant id or "control:<path>"
  std::string task, family;
  fs::path source;    // written under the scratch folder
  std::string origin; // the catalog path it was made from
  const compile_result* compiled = nullptr;
};

// A mutant's per-call limit in the worker: this many times its task's controls' median call (the
// largest median of the task's controls), and never under the floor (a first call loads the
// module; a busy machine stalls a call now and then) nor under the longest call an audited
// protocol's time rule lets pass (KernelBench's 180 s over 108 calls: a mutant at 1.2 s a call is
// slow, not wrong, and KernelBench accepts it). Not the slowest call: beside eight workers'
// contexts a control's slowest call measures the GPU's time slices (0.65 s for exp_fp32's
// elementwise kernel on the H200), and a hang of that task's mutants then cost 32 s. A hang costs
// the limit and a worker start rather than the run's whole timeout.
constexpr double trial_limit_factor = 50;
constexpr double trial_limit_min_seconds = 1;

double trial_limit_floor(const std::vector<protocol>& ps) {
  double floor = trial_limit_min_seconds;
  for (const auto& p : ps)
    floor = std::max(floor, p.call_allowance_seconds());
  return floor;
}

// The GPU workers: half the cores, 1..8. Nothing is timed, the kernels are small and each
// worker's parent thread judges its outputs on the CPU, so the audit scales with the cores more
// than eval does (docs/performance.md).
int default_workers() {
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency() / 2, 1u, 8u));
}

} // namespace

std::vector<std::size_t> audit_judging_order(const std::vector<std::string>& task,
                                             const std::vector<bool>& control, std::size_t lead) {
  // Per task, in order of first appearance: its controls and its mutants.
  std::vector<std::vector<std::size_t>> controls, mutants;
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < task.size(); ++i) {
    const auto [it, added] = index.emplace(task[i], controls.size());
    if (added) {
      controls.emplace_back();
      mutants.emplace_back();
    }
    (control[i] ? controls : mutants)[it->second].push_back(i);
  }
  std::vector<std::size_t> first(controls.size()); // where each task's mutants start
  std::size_t n = 0;
  for (std::size_t t = 0; t < controls.size(); ++t) {
    first[t] = n;
    n += mutants[t].size();
  }
  std::vector<std::size_t> order;
  order.reserve(task.size());
  std::size_t next = 0; // the first task whose controls are not placed yet
  auto controls_up_to = [&](std::size_t s) {
    for (; next < controls.size() && first[next] <= s; ++next)
      order.insert(order.end(), controls[next].begin(), controls[next].end());
  };
  std::size_t s = 0; // mutants placed
  for (std::size_t t = 0; t < controls.size(); ++t)
    for (const auto i : mutants[t]) {
      controls_up_to(s + lead);
      order.push_back(i);
      ++s;
    }
  controls_up_to(static_cast<std::size_t>(-1));
  return order;
}

int run_audit_protocols_command(const audit_checker_options& o, std::ostream& out,
                                std::ostream& err) {
  const auto t_start = std::chrono::steady_clock::now();
  // Every worker's CUDA context with one hardware queue instead of the driver's eight: on the
  // H200 a kg_worker came up in 159 ms against 224 ms alone and 468 ms against 1,079 ms eight
  // at once (docs/performance.md), and a crashing candidate costs a context. Nothing is timed
  // here; a candidate whose streams must run concurrently (one waiting on another's kernel)
  // would hang, so a control that does shows as rejected. KERNELGATE_AUDIT_CONNECTIONS=N (1..32)
  // sets another count, 0 the driver's default; a CUDA_DEVICE_MAX_CONNECTIONS already set is
  // kept. Set here, before any thread starts: setenv races with threads reading the environment
  // (the compile's nvcc launches).
  {
    const char* e = std::getenv("KERNELGATE_AUDIT_CONNECTIONS");
    const std::string n = e && *e ? e : "1";
    int v = -1;
    const auto [p, ec] = std::from_chars(n.data(), n.data() + n.size(), v);
    if (ec != std::errc() || p != n.data() + n.size() || v < 0 || v > 32)
      return bad_input(err, "KERNELGATE_AUDIT_CONNECTIONS='" + n + "' is not a count 0..32");
    if (v > 0) ::setenv("CUDA_DEVICE_MAX_CONNECTIONS", n.c_str(), 0);
  }
  // KERNELGATE_AUDIT_SYNC=auto|spin|yield|block (default block): how the workers wait for the
  // GPU (sandbox/worker_sync.h). A KERNELGATE_WORKER_SYNC already set is kept.
  {
    const char* e = std::getenv("KERNELGATE_AUDIT_SYNC");
    const std::string v = e && *e ? e : "block";
    if (!worker_sync_flag(v))
      return bad_input(err,
                       "KERNELGATE_AUDIT_SYNC='" + v + "' is not one of auto, spin, yield, block");
    ::setenv("KERNELGATE_WORKER_SYNC", v.c_str(), 0);
  }
  // KERNELGATE_AUDIT_GUARD=BYTES (default 2 MiB, 0: none): every fresh trial buffer sits between
  // 0xff guards of max(BYTES, its size) a side. On by default so that a candidate reading a
  // little out of bounds reads the same NaN on every machine and in every run, and a write there
  // is a fault: without guards what lies past a buffer is whatever the driver placed there, and
  // such a mutant's verdict under the looser protocols changed with it (docs/performance.md,
  // *Guarded buffers in the audit*). Parsed here: a bad value is bad input.
  std::size_t guard_bytes = std::size_t{2} << 20;
  if (const char* e = std::getenv("KERNELGATE_AUDIT_GUARD"); e && *e) {
    const std::string n = e;
    const auto [p, ec] = std::from_chars(n.data(), n.data() + n.size(), guard_bytes);
    if (ec != std::errc() || p != n.data() + n.size() || guard_bytes > (std::size_t{1} << 30))
      return bad_input(err, "KERNELGATE_AUDIT_GUARD='" + n + "' is not a byte count 0..2^30");
  }
  // KERNELGATE_AUDIT_JUDGES=N (1..256; default twice the workers): the threads that send
  // candidates to the workers and judge what comes back. A thread holds a worker only for a run,
  // so with more threads than workers the workers keep running while the CPU judges.
  int judges_wanted = 0;
  if (const char* e = std::getenv("KERNELGATE_AUDIT_JUDGES"); e && *e) {
    const std::string n = e;
    const auto [p, ec] = std::from_chars(n.data(), n.data() + n.size(), judges_wanted);
    if (ec != std::errc() || p != n.data() + n.size() || judges_wanted < 1 || judges_wanted > 256)
      return bad_input(err, "KERNELGATE_AUDIT_JUDGES='" + n + "' is not a count 1..256");
  }
  if (o.out.empty()) return bad_input(err, "--out is empty");
  if (o.timeout < 0) return bad_input(err, "--timeout must be > 0");
  if (o.witness_seeds < 1) return bad_input(err, "--witness-seeds must be >= 1");
  std::vector<protocol> protocols;
  if (const auto why = parse_protocols(o.protocol, protocols); !why.empty())
    return bad_input(err, why);
  audit_inputs in;
  if (const auto why = read_audit_inputs(o, in); !why.empty()) return bad_input(err, why);
  std::map<std::string, task_def> tasks;
  for (const auto& [task, file] : in.task_file) {
    try {
      tasks.emplace(task, load_task(file));
    } catch (const std::exception& e) {
      return bad_input(err, "task file " + file.string() + ": " + e.what());
    }
  }
  // Each task's witness plan (workloads/witness_plan.h).
  std::map<std::string, std::unique_ptr<witness_trials>> plans;
  for (const auto& [id, t] : tasks) {
    witness_plan_options wo;
    wo.seeds = o.witness_seeds;
    // From the protocols' own seed: the plan's N(0,1) configurations on the first shape are
    // then the input sets the protocols' first trials draw, and one call serves both.
    wo.first_seed = mutant_audit_options{}.seed;
    try {
      plans[id] = std::make_unique<witness_trials>(t, witness_plan(t, wo));
    } catch (const std::invalid_argument& e) {
      return bad_input(err, e.what());
    }
  }
  const fs::path dir = o.out;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir) || ::access(dir.c_str(), W_OK) != 0)
    return bad_input(err, "cannot create output folder '" + dir.string() + "'");
  // KERNELGATE_FAKE_DEVICE=1 with KERNELGATE_WORKER: the CPU tests drive the pipeline without a
  // GPU (as eval's).
  const char* fake = std::getenv("KERNELGATE_FAKE_DEVICE");
  const bool fake_device = fake && std::string(fake) == "1" && std::getenv("KERNELGATE_WORKER");
  const auto dev = query_device(0);
  if (!dev.available && !fake_device) {
    err << "kernelgate: audit checker: no GPU to run the protocols on: " << dev.reason << "\n";
    return exit_code::unavailable;
  }

  // The candidates: per task its controls (each mutated file as it is), then its mutants that
  // may be wrong (not equivalent, not known not to compile).
  const fs::path scratch = memory_scratch(dir, "kernelgate-audit");
  remove_tree(scratch);
  fs::create_directories(scratch / "src");
  std::vector<kill_row> rows;
  std::vector<candidate> work;
  std::map<std::string, int> controls_of_task;
  for (const auto& [path, text] : in.sources) {
    const auto& task = in.task_of_path[path];
    rows.push_back({"control:" + path, "", task, witness_status::not_run, true});
    const auto f = scratch / "src" / ("control-" + std::to_string(work.size()) + ".cu");
    std::ofstream(f, std::ios::binary) << text;
    work.push_back({rows.back().id, task, "", f, path});
    ++controls_of_task[task];
  }
  for (const auto& m : in.mutants) {
    const auto it = in.status.find(m.id);
    const auto s = it == in.status.end() ? witness_status::not_run : it->second;
    const bool skip = s == witness_status::equivalent || s == witness_status::compile_error;
    rows.push_back({m.id, m.family, m.task, skip ? s : witness_status::not_run, false});
    if (skip) continue;
    try {
      const auto f = scratch / "src" / (m.id + ".cu");
      std::ofstream(f, std::ios::binary) << apply_mutant(in.sources.at(m.path), m);
      work.push_back({m.id, m.task, m.family, f, m.path});
    } catch (const std::exception& e) {
      return bad_input(err, "the catalog does not match " + m.path + ": " + e.what());
    }
  }
  // In task order, controls first within a task (a task's trials are shared; its controls decide
  // which configurations the suite may use).
  std::stable_sort(work.begin(), work.end(), [](const candidate& a, const candidate& b) {
    const bool ac = a.row.rfind("control:", 0) == 0, bc = b.row.rfind("control:", 0) == 0;
    return a.task != b.task ? a.task < b.task : ac > bc;
  });
  // Then each task's controls moved ahead of the mutants before them (audit_judging_order): two
  // rounds of the workers' candidates between a control and its task's first mutant, so the
  // workers never wait at a task's start for its control. Compiled in this order too.
  const int workers = o.workers > 0 ? o.workers : default_workers();
  const int judges = judges_wanted > 0 ? judges_wanted : 2 * workers;
  {
    std::vector<std::string> task_of;
    std::vector<bool> control_of;
    for (const auto& c : work) {
      task_of.push_back(c.task);
      control_of.push_back(c.row.rfind("control:", 0) == 0);
    }
    std::vector<candidate> ordered;
    ordered.reserve(work.size());
    for (const auto i :
         audit_judging_order(task_of, control_of, 2 * static_cast<std::size_t>(workers)))
      ordered.push_back(std::move(work[i]));
    work = std::move(ordered);
  }
  std::vector<std::string> columns;
  for (const auto& p : protocols)
    columns.push_back(p.name);
  kill_matrix km(rows, columns);

  // Phase 1: compile, in the judging order with the controls first, while phase 2 judges each
  // candidate as soon as it is compiled. The judging starts once every control is compiled: a
  // correct kernel that does not compile is bad input, found before anything runs.
  const auto t_compile = std::chrono::steady_clock::now();
  // Each control alone (the same binary eval builds); the mutants of one file in batches, each
  // file's group where its first mutant comes in the order.
  std::vector<std::vector<std::size_t>> group_members;
  std::size_t n_controls = 0;
  for (std::size_t i = 0; i < work.size(); ++i)
    if (work[i].row.rfind("control:", 0) == 0) {
      group_members.push_back({i});
      ++n_controls;
    }
  std::map<std::string, std::size_t> group_of_origin;
  for (std::size_t i = 0; i < work.size(); ++i) {
    if (work[i].row.rfind("control:", 0) == 0) continue;
    const auto [it, added] = group_of_origin.emplace(work[i].origin, group_members.size());
    if (added) group_members.emplace_back();
    group_members[it->second].push_back(i);
  }
  std::vector<std::vector<fs::path>> groups;
  std::vector<std::size_t> order; // work index per result, in the groups' flat order
  // Each file's mutants batched by what its control's compile cost (candidate_batch.h).
  std::vector<std::size_t> probes(group_members.size(), static_cast<std::size_t>(-1));
  std::map<std::string, std::size_t> control_of_origin;
  for (std::size_t g = 0; g < group_members.size(); ++g) {
    const auto& c = work[group_members[g].front()];
    if (c.row.rfind("control:", 0) == 0)
      control_of_origin.emplace(c.origin, g);
    else if (const auto it = control_of_origin.find(c.origin); it != control_of_origin.end())
      probes[g] = it->second;
  }
  for (const auto& g : group_members) {
    groups.emplace_back();
    for (const auto i : g) {
      groups.back().push_back(work[i].source);
      order.push_back(i);
    }
  }
  compile_options copt;
  copt.jobs = o.jobs;
  // A mutant's batch compiles in seconds; one that runs for minutes (a mutated loop bound that
  // the compiler unrolls without end) holds a compile thread and, with its single retry, keeps
  // the compile's end waiting: two minutes, then it is a mutant that does not compile.
  copt.timeout_seconds = 120;
  out << "kernelgate audit checker: compiling " << work.size() << " candidates ("
      << in.sources.size() << " controls, " << protocols.size() << " protocols)\n"
      << std::flush;
  std::vector<compile_result> compiled(work.size());
  for (std::size_t i = 0; i < work.size(); ++i)
    work[i].compiled = &compiled[i];
  // Guards the compile's results as they come and phase 2's shared state.
  std::mutex mu;
  std::condition_variable compiled_cv;
  std::vector<char> is_compiled(work.size(), 0); // compiled[i] holds its result
  std::size_t controls_compiled = 0;
  int compile_failures = 0;
  bool compile_finished = false, compile_line_shown = false;
  double compile_seconds = 0;
  std::exception_ptr compile_fault;
  progress_meter* meter_now = nullptr; // phase 2's, once it is drawn
  std::atomic<bool> cancel_compile{false};
  auto compile_line = [&] {
    std::ostringstream s;
    s << "compile: " << work.size() << " in " << static_cast<long>(compile_seconds + 0.5) << " s ("
      << compile_failures << " mutants do not compile)";
    return s.str();
  };
  batch_options bo;
  bo.as_given = true;
  bo.probes = std::move(probes);
  // A third of the timeout: a compile slows two- or threefold under the judging's load.
  bo.batch_seconds = copt.timeout_seconds / 3;
  bo.cancel = &cancel_compile;
  bo.on_compiled = [&](std::size_t j, const compile_result& r) {
    const std::size_t i = order[j];
    std::lock_guard<std::mutex> l(mu);
    compiled[i] = r;
    is_compiled[i] = 1;
    if (work[i].row.rfind("control:", 0) == 0) {
      ++controls_compiled;
    } else if (!r.ok) {
      ++compile_failures;
      km.set_status(work[i].row, witness_status::compile_error);
    }
    compiled_cv.notify_all();
  };
  std::jthread compiler([&] {
    std::exception_ptr fault;
    try {
      compile_in_batches(groups, scratch / "batches", copt, bo);
    } catch (...) {
      fault = std::current_exception();
    }
    std::lock_guard<std::mutex> l(mu);
    compile_fault = fault;
    compile_seconds = seconds_since(t_compile);
    compile_finished = true;
    if (meter_now) {
      meter_now->note(compile_line());
      compile_line_shown = true;
    }
    compiled_cv.notify_all();
  });
  // Whatever way this function ends, the compile starts nothing more (then `compiler` joins).
  struct cancel_on_exit {
    std::atomic<bool>& cancel;
    ~cancel_on_exit() { cancel = true; }
  } cancel_guard{cancel_compile};
  {
    std::unique_lock<std::mutex> l(mu);
    compiled_cv.wait(l, [&] { return controls_compiled == n_controls || compile_finished; });
    if (compile_fault) {
      cancel_compile = true;
      l.unlock();
      compiler.join();
      std::rethrow_exception(compile_fault);
    }
  }
  for (std::size_t i = 0; i < work.size(); ++i)
    if (work[i].row.rfind("control:", 0) == 0 && !compiled[i].ok) {
      cancel_compile = true;
      compiler.join();
      return bad_input(err, "a correct kernel does not compile: " + work[i].row.substr(8) + ": " +
                                one_line_of(compiled[i].log));
    }

  // Phase 2: witness and protocols, on the GPU.
  const auto t_audit = std::chrono::steady_clock::now();
  std::vector<audit_check> checks;
  for (const auto& p : protocols)
    checks.push_back({p.name, p.name == "strict" ? nullptr : &p});
  const double limit_floor = trial_limit_floor(protocols);
  trial_cache cache(scratch / "trials");
  gpu_gate gate;
  mutant_audit_options shared;
  shared.self_exe = worker_binary();
  shared.timeout_seconds = o.timeout > 0 ? o.timeout : 30;
  shared.cache = &cache;
  shared.gate = &gate;
  // KERNELGATE_AUDIT_RESIDENT=1: each worker keeps its task's inputs on the device across
  // candidates (sandbox/resident_inputs.h), in at most a quarter of the device's memory shared
  // among the workers. Off by default until the H200 has verified it since its scrub race was
  // fixed (docs/performance.md).
  if (const char* e = std::getenv("KERNELGATE_AUDIT_RESIDENT"); e && std::string(e) == "1")
    shared.resident_bytes = dev.memory_bytes / 4 / static_cast<std::size_t>(workers);
  // The guards (above) are for fresh buffers; resident inputs come from a pool without them.
  if (shared.resident_bytes == 0) shared.guard_bytes = guard_bytes;
  // KERNELGATE_AUDIT_POOL=0: every trial allocates and frees its buffers (cudaMalloc and cudaFree
  // synchronize the device). By default each worker takes them from a pool and keeps up to an
  // eighth of the device's memory, shared among the workers, idle between trials.
  if (const char* e = std::getenv("KERNELGATE_AUDIT_POOL");
      shared.resident_bytes == 0 && !(e && std::string(e) == "0"))
    shared.pool_bytes = dev.memory_bytes / 8 / static_cast<std::size_t>(workers);
  // Candidates of each task not yet done (or found not to compile).
  std::map<std::string, int> left;
  // A task's mutants wait for its controls: their median call sets the mutants' per-call limit.
  std::map<std::string, int> controls_left;
  std::map<std::string, double> control_call;
  std::condition_variable controls_done;
  for (const auto& c : work) {
    ++left[c.task];
    if (c.row.rfind("control:", 0) == 0) ++controls_left[c.task]; // (each compiled: above)
  }
  std::map<std::string, std::vector<std::vector<bool>>> control_kills; // task -> per control
  std::map<std::string, witness_record> witnessed;                     // mutant id -> record
  std::vector<nlohmann::json> witness_lines; // as streamed; rewritten at the end (below)
  std::ofstream wstream(dir / "witnesses.jsonl", std::ios::trunc),
      vstream(dir / "verdicts.jsonl", std::ios::trunc);
  if (!wstream || !vstream) return bad_input(err, "cannot write into '" + dir.string() + "'");
  std::atomic<std::size_t> next{0};
  std::atomic<bool> stopped{false};
  // The meter's items: every candidate (a mutant that does not compile is a line of its own, as
  // the compile may still be running when the judging starts).
  std::size_t done = 0, shown = 0;
  const std::size_t total = work.size();
  int worker_runs = 0, crashes = 0, timeouts = 0, hangs = 0, sanitized_count = 0,
      killed_by_sanitizer = 0;
  int unjudged_controls = 0, unjudged_mutants = 0; // a fault of the harness: verdicts unknown
  // Per task: the witness configurations its task refuses to compute (sandbox/mutant_audit.h).
  std::map<std::string, nlohmann::json> refused_configs;
  const fs::path sanitizer = find_compute_sanitizer();
  const std::size_t memory_budget = [] {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * page / 8
                                 : std::size_t{2} << 30;
  }();
  fs::create_directories(dir / "workers");
  progress_meter meter(out, progress_bar_wanted(out, o.no_progress), total);
  struct forget_meter { // (should this function end before the compile does)
    std::mutex& m;
    progress_meter*& p;
    ~forget_meter() {
      std::lock_guard<std::mutex> l(m);
      p = nullptr;
    }
  } meter_guard{mu, meter_now};
  {
    std::lock_guard<std::mutex> l(mu);
    meter_now = &meter;
    if (compile_finished) {
      meter.note(compile_line());
      compile_line_shown = true;
    }
  }
  worker_set worker_slots(workers, [&](int n) {
    auto w = std::make_unique<worker_process>(
        worker_command(shared.self_exe), dir / "workers" / ("worker-" + std::to_string(n) + ".log"),
        worker_limits());
    w->expect_ready(true);
    w->set_prestart(true); // (crashes and hangs are common here: each costs a restart)
    return w;
  });
  // The outputs a run writes sit in memory-backed scratch until judged: with more threads than
  // workers, a large task's runs (tens of trials of tens of megabytes) could otherwise pile up.
  // A quarter of the machine's memory: eight runs of a 16M-element task's stage (about 4 GB
  // each, what eight threads with a worker each could hold before) still fit on the H200's.
  byte_budget output_budget(2 * memory_budget);
  auto thread_body = [&] {
    for (std::size_t i; (i = next++) < work.size();) {
      const auto& c = work[i];
      bool have = false; // its compile's result
      {
        std::unique_lock<std::mutex> l(mu);
        if (!is_compiled[i] && !compile_finished && !stopped) {
          scoped_phase phase("audit.wait_compile"); // (logged only when there is a wait)
          while (!is_compiled[i] && !compile_finished && !stopped && !stop_requested())
            compiled_cv.wait_for(l, std::chrono::seconds(1));
        }
        have = is_compiled[i];
      }
      if (stopped || stop_requested()) {
        std::lock_guard<std::mutex> l(mu);
        stopped = true;
        controls_done.notify_all(); // (mutants waiting for a control that will not run now)
        compiled_cv.notify_all();
        continue;
      }
      if (!have) continue; // the compile ended without it (its fault is rethrown below)
      const auto& task = tasks.at(c.task);
      const auto* plan = plans.at(c.task).get();
      if (!c.compiled->ok) { // a mutant (a control that does not compile ends the run above)
        std::lock_guard<std::mutex> l(mu);
        std::ostringstream line;
        line << "[" << ++shown << "/" << total << "] " << c.row << "  does not compile";
        meter.done(line.str());
        if (--left[c.task] == 0) cache.forget(audit_trial_keys(task, plan, checks, shared));
        continue;
      }
      meter.start(c.row);
      // The next task's trials (the task of the next control in the order), computed on the
      // cache's pool while this one runs -- unless the trials held already pass an eighth of the
      // machine's memory (a 16M-element task's plan and protocols hold gigabytes; their files sit
      // in memory-backed scratch too).
      for (std::size_t j = i + 1; j < work.size() && cache.resident_bytes() < memory_budget; ++j)
        if (work[j].task != c.task && work[j].row.rfind("control:", 0) == 0) {
          for (const auto& k : audit_trial_keys(tasks.at(work[j].task),
                                                plans.at(work[j].task).get(), checks, shared))
            cache.prefetch(k);
          break;
        }
      const bool control = c.row.rfind("control:", 0) == 0;
      mutant_audit_options so = shared;
      so.workers = &worker_slots;
      so.output_bytes = &output_budget;
      so.work_dir = scratch / "runs" / std::to_string(i);
      so.mutant = !control;
      if (!control) {
        std::unique_lock<std::mutex> l(mu);
        auto ready = [&] { return controls_left[c.task] == 0 || stopped; };
        if (!ready()) {
          scoped_phase phase("audit.wait_control"); // (logged only when there is a wait)
          controls_done.wait(l, ready);
        }
        if (stopped) continue;
        if (const auto it = control_call.find(c.task); it != control_call.end())
          so.trial_limit_seconds = std::max(limit_floor, trial_limit_factor * it->second);
      }
      candidate_audit a;
      try {
        a = audit_candidate(task, *c.compiled, plan, checks, so);
      } catch (const std::exception& e) { // a fault of the harness: this row stays unknown
        std::lock_guard<std::mutex> l(mu);
        err << "kernelgate: audit checker: " << c.row << ": " << e.what() << "\n";
        ++(control ? unjudged_controls : unjudged_mutants);
        if (control && --controls_left[c.task] == 0) controls_done.notify_all();
        continue;
      }
      // A synchronization mutant no output shows wrong may still race: the sanitizer says.
      std::optional<sanitizer_finding> sanitized;
      if (!control && c.family == "synchronization" &&
          a.witness.status == witness_status::unwitnessed) {
        try {
          sanitized = sanitize_candidate(task, *c.compiled, *plan, so, sanitizer);
        } catch (const std::exception& e) { // a fault of the harness: no finding, said so
          sanitized = sanitizer_finding{};
          sanitized->detail = std::string("not run: ") + e.what();
        }
      }
      std::lock_guard<std::mutex> l(mu);
      if (!a.refused.empty() && !refused_configs.count(c.task))
        for (const auto& r : a.refused)
          refused_configs[c.task].push_back(
              nlohmann::json{{"config", plan->plan().at(r.config).name}, {"reason", r.reason}});
      worker_runs += a.worker_runs;
      crashes += a.crashes;
      timeouts += a.timeouts;
      hangs += a.hangs;
      if (control) {
        control_call[c.task] = std::max(control_call[c.task], a.median_trial_seconds);
        if (--controls_left[c.task] == 0) controls_done.notify_all();
      }
      nlohmann::json verdicts = nlohmann::json::object();
      for (std::size_t k = 0; k < checks.size(); ++k) {
        km.set(c.row, checks[k].name, a.checks[k].verdict);
        verdicts[checks[k].name] = {{"verdict", kill_verdict_name(a.checks[k].verdict)},
                                    {"reason", a.checks[k].reason}};
      }
      if (control) {
        control_kills[c.task].push_back(a.witness.kills);
      } else {
        km.set_status(c.row, a.witness.status);
        witnessed[c.row] = a.witness;
      }
      auto w = a.witness.to_json(plan->plan());
      w["id"] = c.row;
      w["task"] = c.task;
      w["status"] = witness_status_name(a.witness.status);
      if (!control) w["family"] = c.family;
      if (sanitized) {
        w["sanitizer"] = sanitized->to_json();
        if (sanitized->found) ++killed_by_sanitizer;
        ++sanitized_count;
      }
      w["control"] = control;
      wstream << w.dump() << "\n" << std::flush;
      witness_lines.push_back(std::move(w));
      vstream << nlohmann::json{{"row", c.row},
                                {"task", c.task},
                                {"checks", verdicts},
                                {"worker_runs", a.worker_runs},
                                {"crashes", a.crashes},
                                {"hangs", a.hangs},
                                {"trial_limit_seconds", so.trial_limit_seconds},
                                {"trials_sent", a.trials_sent},
                                {"run_seconds", a.run_seconds},
                                {"judge_seconds", a.judge_seconds},
                                {"seconds", a.seconds}}
                     .dump()
              << "\n"
              << std::flush;
      ++done;
      ++shown;
      int accepted_by = 0;
      for (const auto& ch : a.checks)
        accepted_by += ch.verdict == kill_verdict::survived;
      std::ostringstream line;
      line << "[" << shown << "/" << total << "] " << c.row << "  "
           << (control ? "control" : witness_status_name(a.witness.status)) << ", accepted by "
           << accepted_by << " of " << checks.size() << " protocols  (" << std::fixed
           << std::setprecision(1) << a.seconds << " s)";
      meter.done(line.str());
      if (--left[c.task] == 0) cache.forget(audit_trial_keys(task, plan, checks, shared));
    }
  };
  {
    std::vector<std::jthread> threads;
    for (int n = 0; n < judges; ++n)
      threads.emplace_back(thread_body);
  }
  cancel_compile = true; // (all compiled by now, unless interrupted)
  compiler.join();
  if (compile_fault) std::rethrow_exception(compile_fault);
  if (!compile_line_shown) meter.note(compile_line());
  meter.finish();
  const double audit_seconds = seconds_since(t_audit);

  // Phase 3: suites, reports, scores.
  const auto t_report = std::chrono::steady_clock::now();
  nlohmann::json suites = nlohmann::json::object();
  std::set<std::string> demoted;
  for (const auto& [id, t] : tasks) {
    const auto& plan = plans.at(id)->plan();
    cover_problem p;
    for (const auto& c : plan)
      p.configs.push_back(c.name);
    p.kills.assign(plan.size(), {});
    p.fails_control.assign(plan.size(), false);
    for (const auto& kills : control_kills[id])
      for (std::size_t c = 0; c < kills.size() && c < plan.size(); ++c)
        if (kills[c]) p.fails_control[c] = true;
    // A disagreement counts only where every correct kernel of the task agrees with the oracle: a
    // mutant wrong only where its control is wrong too (an input the kernel does not support) is
    // unwitnessed.
    for (auto& [mid, rec] : witnessed) {
      if (km.rows()[km.row_index(mid)].task != id || rec.status != witness_status::witnessed)
        continue;
      bool valid = false;
      for (std::size_t c = 0; c < plan.size() && c < rec.kills.size(); ++c)
        valid = valid || (rec.kills[c] && !p.fails_control[c]);
      if (!valid) {
        rec.status = witness_status::unwitnessed;
        km.set_status(mid, rec.status);
        demoted.insert(mid);
        continue;
      }
      p.mutants.push_back(mid);
      for (std::size_t c = 0; c < plan.size(); ++c)
        p.kills[c].push_back(c < rec.kills.size() && rec.kills[c]);
    }
    if (p.mutants.empty()) continue;
    auto s = suggest_input_suite(p).to_json();
    for (const auto& c : plan) // the chosen configurations in full
      if (std::find(s["configs"].begin(), s["configs"].end(), c.name) != s["configs"].end())
        s["config_detail"].push_back(c.to_json());
    suites[id] = s;
  }
  std::map<std::string, std::vector<std::string>> invalid; // protocol -> tasks
  const nlohmann::json scores = protocol_scores(km, protocols, invalid);
  std::map<std::string, int> statuses;
  for (const auto& r : km.rows())
    if (!r.control) ++statuses[std::string(witness_status_name(r.status))];
  try {
    write_file_atomically(dir / "kill_matrix.json", km.to_json().dump() + "\n");
    for (const auto& p : protocols)
      write_file_atomically(dir / ("report." + p.name + ".mutation.json"),
                            mutation_report(km, p.name, in.mutants, in.sources).dump() + "\n");
    write_file_atomically(dir / "input_suites.json", suites.dump(1) + "\n");
    // The witness lines again, with the statuses the controls decided (streamed ones may say
    // witnessed where only a control-failing configuration disagreed).
    std::string lines;
    for (auto& w : witness_lines) {
      if (demoted.count(w.value("id", std::string()))) {
        w["status"] = "unwitnessed";
        w["status_reason"] = "every disagreement is on a configuration a correct kernel of the "
                             "task fails too";
      }
      lines += w.dump() + "\n";
    }
    wstream.close();
    write_file_atomically(dir / "witnesses.jsonl", lines);
  } catch (const std::exception& e) {
    return bad_input(err, e.what());
  }
  const double report_seconds = seconds_since(t_report);
  const nlohmann::json summary = {
      {"schema", "kernelgate.audit.protocols/1"},
      {"status", stopped ? "interrupted" : "complete"},
      {"environment", collect_environment()},
      {"catalog", o.catalog},
      {"tasks", tasks.size()},
      {"mutants", in.mutants.size()},
      {"controls", in.sources.size()},
      {"witness_statuses", statuses},
      {"unwitnessed_because_a_control_fails_there", demoted.size()},
      {"witness_plan",
       {{"seeds", o.witness_seeds},
        {"first_seed", mutant_audit_options{}.seed},
        {"refused", refused_configs}}},
      {"not_judged", {{"controls", unjudged_controls}, {"mutants", unjudged_mutants}}},
      {"candidates_run", done},
      {"worker_runs", worker_runs},
      {"crashes", crashes},
      {"timeouts", timeouts},
      {"hangs", hangs},
      {"trial_limit", {{"factor", trial_limit_factor}, {"floor_seconds", limit_floor}}},
      {"guard_bytes", shared.guard_bytes},
      {"pool_bytes", shared.pool_bytes},
      {"sanitizer",
       {{"path", sanitizer.string()},
        {"unwitnessed_synchronization_mutants_run", sanitized_count},
        {"killed_by_sanitizer", killed_by_sanitizer}}},
      {"workers", workers},
      {"judges", judges},
      {"phases_seconds",
       {{"compile", compile_seconds},
        {"witness_and_protocols", audit_seconds},
        {"report", report_seconds},
        {"total", seconds_since(t_start)}}},
      {"protocols", scores},
      {"published_reference", published_reference()}};
  try {
    write_file_atomically(dir / "summary.json", summary.dump(1) + "\n");
  } catch (const std::exception& e) {
    return bad_input(err, e.what());
  }
  remove_tree(scratch);

  print_escape_table(out, km, km.checkers());
  if (scores.contains("kernelbench")) print_published_reference(out);
  out << "witness: ";
  for (const auto& [s, n] : statuses)
    out << n << " " << s << "; ";
  out << "phases: compile " << static_cast<long>(compile_seconds + 0.5) << " s, witness + "
      << protocols.size() << " protocols " << static_cast<long>(audit_seconds + 0.5) << " s, total "
      << static_cast<long>(seconds_since(t_start) + 0.5) << " s\n";
  for (const auto& [t, rs] : refused_configs)
    out << "witness plan of " << t << ": " << rs.size()
        << " configurations of added shapes refused by the task, not run ("
        << rs.front()["reason"].get<std::string>() << ")\n";
  if (stopped) {
    out << "interrupted: " << done << " of " << total - compile_failures
        << " candidates audited (kept)\n";
    return exit_code::interrupted;
  }
  if (unjudged_controls + unjudged_mutants > 0)
    out << unjudged_controls << " correct kernels and " << unjudged_mutants
        << " mutants not judged: a fault of the harness (above); their verdicts are unknown\n";
  if (invalid.empty()) {
    if (unjudged_controls > 0) return exit_code::failures; // (not known to be accepted)
    out << "every correct kernel accepted by every protocol\n";
    return unjudged_mutants > 0 ? exit_code::failures : exit_code::ok;
  }
  for (const auto& [p, ts] : invalid) {
    out << p << " rejected a correct kernel: invalid for";
    for (const auto& t : std::set<std::string>(ts.begin(), ts.end()))
      out << " " << t;
    out << "\n";
  }
  return exit_code::failures;
}

} // namespace kg
