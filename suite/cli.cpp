#include "suite/cli.h"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "oracles/protocol.h"
#include "reports/environment.h"
#include "reports/json_schema.h"
#include "reports/result_schema.h"
#include "suite/audit.h"
#include "suite/eval_command.h"
#include "suite/exit_codes.h"
#include "suite/fastp_command.h"
#include "suite/time_command.h"
#include "suite/worker.h"
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
      err << "kernelgate: unknown option '" << a << "'\n";
      return std::nullopt;
    }
    if (i + 1 >= args.size()) {
      err << "kernelgate: option '" << a << "' needs a value\n";
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
  std::ifstream f(args[2]);
  if (!f) {
    err << "kernelgate: cannot read '" << args[2] << "'\n";
    return exit_code::bad_input;
  }
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(f);
  } catch (const nlohmann::json::parse_error& e) {
    err << "kernelgate: malformed JSON in '" << args[2] << "': " << e.what() << "\n";
    return exit_code::bad_input;
  }
  const auto errors = validate_json(nlohmann::json::parse(result_schema_text()), doc);
  if (errors.empty()) {
    out << args[2] << ": valid " << doc.value("schema", "?") << " ("
        << (doc.contains("records") ? doc["records"].size() : 0) << " records)\n";
    return exit_code::ok;
  }
  for (const auto& e : errors)
    err << args[2] << ": " << e.path << ": " << e.message << "\n";
  return exit_code::failures;
}

} // namespace

int kernelgate_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.size() < 2 || args[1] == "help" || args[1] == "--help" || args[1] == "-h") {
    (args.size() < 2 ? err : out) << usage;
    return args.size() < 2 ? exit_code::bad_input : exit_code::ok;
  }
  const std::string& cmd = args[1];
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
    if (cmd == "worker" && args.size() == 3) return run_worker(args[2]);
    if (cmd == "worker" && args.size() == 5 && args[2] == "--serve")
      return run_worker_serve(std::stoi(args[3]), std::stoi(args[4]));
  } catch (const std::exception& e) {
    err << "kernelgate: internal error: " << e.what() << "\n";
    return exit_code::internal;
  }
  err << "kernelgate: unknown command '" << cmd << "' (see kernelgate help)\n";
  return exit_code::bad_input;
}

} // namespace kg
