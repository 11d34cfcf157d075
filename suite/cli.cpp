#include "suite/cli.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "oracles/protocol.h"
#include "reports/environment.h"
#include "reports/json_input.h"
#include "reports/json_schema.h"
#include "reports/result_schema.h"
#include "reports/result_writer.h"
#include "suite/audit.h"
#include "suite/eval_command.h"
#include "suite/exit_codes.h"
#include "suite/fastp_command.h"
#include "suite/time_command.h"
#include "sandbox/worker.h"
#include "suite/workload_command.h"

namespace kg {
namespace {

constexpr const char* usage = R"(usage: kernelgate <command> [options]

commands:
  env [--json]                     the environment every result embeds
  audit <name> [--backend cpu|cuda] [--protocol NAME] [--out DIR]
                                   audit a checker (names: layernorm-affine)
  time --impl NAME [--vs NAME] [--clocks observe|require-locked|lock=MHz]
       [--backend auto|events|graph|cupti|counters] [--shape RxC] [--dtype float32|float16]
       [--min-effect F] [--out DIR]
                                   time a kernel (cold, L2 flushed), optionally against another
  eval --tasks GLOB --candidates DIR [--protocol strict|PEER] [--trials N] [--timeout S] [--jobs N]
       [--workers N] [--cache DIR] [--time yes|no] [--time-budget S] [--baselines DIR]
       [--scratch DIR] [--out DIR] [--kernelbench FILE]
                                   compile and run every (task, candidate) pair in a sandboxed
                                   worker, check it against the task's fp64 oracle, and time a
                                   passing one against the task's own kernel
  fastp RESULT [--baseline FILE] [--level N] [--dataset DIR] [--p 0,0.5,0.8,1,1.5,2]
        [--min-effect F] [--candidate NAME] [--json] [--out DIR]
                                   strict fast_p over intended and aligned tasks, with intervals,
                                   noise-aware counts and near-ties (RESULT: a kernelgate eval
                                   result, or KernelBench's eval_results.json with --baseline)
  workload list | workload run ID [--device cpu|cuda] [--steps N] [--jobs N] [--out DIR]
                                   run a workload of the Qwen3-4B stack (LoRA training today):
                                   metrics with intervals, gate verdicts, a workload result
  protocols [--json]               the checking protocols and the peers they model
  validate <result.json>           check a result file against the result schema
  help                             this text

exit codes: 0 ok, 1 ran with failures (errors, non-conforming file), 2 bad input,
            3 backend unavailable, 4 internal error, 130 interrupted
)";

// Parses "--key value" pairs after the positional arguments. Returns nullopt (and prints) on an
// unknown option or a missing value.
std::optional<std::map<std::string, std::string>>
parse_options(const std::vector<std::string>& args, std::size_t first,
              const std::vector<std::string>& allowed, const std::vector<std::string>& flags,
              std::vector<std::string>& positional, std::ostream& err) {
  std::map<std::string, std::string> opts;
  for (std::size_t i = first; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0) {
      positional.push_back(a);
      continue;
    }
    if (std::find(flags.begin(), flags.end(), a) != flags.end()) {
      opts[a] = "1";
      continue;
    }
    if (std::find(allowed.begin(), allowed.end(), a) == allowed.end()) {
      err << "kernelgate: unknown option '" << printable(a) << "'\n";
      return std::nullopt;
    }
    if (i + 1 >= args.size()) {
      err << "kernelgate: option '" << printable(a) << "' needs a value\n";
      return std::nullopt;
    }
    opts[a] = args[++i];
  }
  return opts;
}

int cmd_env(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::vector<std::string> pos;
  auto opts = parse_options(args, 2, {}, {"--json"}, pos, err);
  if (!opts) return exit_code::bad_input;
  if (!pos.empty()) {
    err << "kernelgate: env takes no argument '" << pos[0] << "'\n";
    return exit_code::bad_input;
  }
  const auto env = collect_environment();
  if (opts->count("--json"))
    out << env.dump(2) << "\n";
  else
    out << format_environment(env);
  return exit_code::ok;
}

int cmd_audit(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::vector<std::string> pos;
  auto opts = parse_options(args, 2, {"--backend", "--protocol", "--out"}, {}, pos, err);
  if (!opts) return exit_code::bad_input;
  if (pos.size() != 1) {
    err << "kernelgate: audit needs exactly one audit name (known: layernorm-affine)\n";
    return exit_code::bad_input;
  }
  audit_request req;
  req.name = pos[0];
  req.argv = args;
  if (opts->count("--backend")) req.backend = opts->at("--backend");
  if (opts->count("--protocol")) req.protocol = opts->at("--protocol");
  req.out = opts->count("--out")
                ? std::filesystem::path(opts->at("--out"))
                : std::filesystem::path("kg-out") / ("audit-" + req.name + "-" + req.backend);
  return run_audit(req, out, err);
}

int cmd_protocols(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::vector<std::string> pos;
  auto opts = parse_options(args, 2, {}, {"--json"}, pos, err);
  if (!opts) return exit_code::bad_input;
  nlohmann::json all = nlohmann::json::array();
  for (auto n : protocol_names())
    all.push_back(find_protocol(n)->to_json());
  if (opts->count("--json")) {
    out << all.dump(2) << "\n";
  } else {
    for (const auto& p : all)
      out << p["name"].get<std::string>() << " -- " << p["models"].get<std::string>() << "\n  "
          << p["notes"].get<std::string>() << "\n";
  }
  return exit_code::ok;
}

int cmd_validate(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.size() != 3) {
    err << "kernelgate: validate needs one file\n";
    return exit_code::bad_input;
  }
  nlohmann::json doc;
  try {
    doc = read_json_file_checked(args[2]);
  } catch (const json_input_error& e) {
    err << "kernelgate: " << printable(e.what(), 400) << "\n";
    return exit_code::bad_input;
  }
  const auto errors = validate_json(nlohmann::json::parse(result_schema_text()), doc);
  if (errors.empty()) {
    out << args[2] << ": valid " << doc.value("schema", "?") << " ("
        << (doc.contains("records") ? doc["records"].size() : 0) << " records)\n";
    return exit_code::ok;
  }
  for (const auto& e : errors)
    err << printable(args[2]) << ": " << printable(e.path) << ": " << printable(e.message, 400)
        << "\n";
  return exit_code::failures;
}

// Internal: the sandbox runs candidates as `kernelgate worker MANIFEST`, and `kernelgate eval`
// keeps workers as `kernelgate worker --serve REQUEST_FD REPLY_FD`.
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

} // namespace

int kernelgate_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.size() < 2 || args[1] == "help" || args[1] == "--help" || args[1] == "-h") {
    (args.size() < 2 ? err : out) << usage;
    return args.size() < 2 ? exit_code::bad_input : exit_code::ok;
  }
  const std::string& cmd = args[1];
  // A result.json in the output folder is always this run's: an old one goes before any check
  // of the options or inputs, so a run that stops early leaves none behind.
  if (cmd == "audit" || cmd == "time" || cmd == "eval" || cmd == "fastp" || cmd == "workload")
    for (std::size_t i = 2; i + 1 < args.size(); ++i)
      if (args[i] == "--out")
        if (const auto why = remove_stale_result(args[i + 1]); !why.empty()) {
          err << "kernelgate: " << printable(why) << "\n";
          return exit_code::bad_input;
        }
  try {
    if (cmd == "env") return cmd_env(args, out, err);
    if (cmd == "audit") return cmd_audit(args, out, err);
    if (cmd == "protocols") return cmd_protocols(args, out, err);
    if (cmd == "validate") return cmd_validate(args, out, err);
    if (cmd == "time") return run_time_command(args, out, err);
    if (cmd == "fastp") return run_fastp_command(args, out, err);
    if (cmd == "eval") return run_eval_command(args, out, err);
    if (cmd == "workload") return run_workload_command(args, out, err);
    // Internal: the sandbox runs candidates as `kernelgate worker MANIFEST`, and `kernelgate eval`
    // keeps workers as `kernelgate worker --serve REQUEST_FD REPLY_FD`.
    if (cmd == "worker") return cmd_worker(args, err);
  } catch (const std::exception& e) {
    err << "kernelgate: internal error: " << printable(e.what(), 400) << "\n";
    return exit_code::internal;
  }
  err << "kernelgate: unknown command '" << printable(cmd) << "' (see kernelgate help)\n";
  return exit_code::bad_input;
}

} // namespace kg
