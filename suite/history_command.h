// The run history's CLI glue: `kernelgate history FILE`, the `--history FILE.sqlite` option of
// `run`, `eval`, `audit` and `audit checker` (a run appended once its result is written), and
// the BASE that `compare --baseline-from` rebuilds. The database itself is reports/run_history.h.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kg {

struct history_options {
  std::string file;
  std::optional<std::string> workload, since;
  bool json = false;
  // --append RESULT: append a run already written (a result.json or its folder) instead of
  // querying: backfilling older runs, or shards run on other machines.
  std::optional<std::string> append;
};

// Exit 0, or 2 for bad input (no database, not one, a newer schema, a malformed --since, a
// --workload no run holds).
int run_history_command(const history_options& o, std::ostream& out, std::ostream& err);

// Before a command that appends runs: opens FILE, creating or migrating it, so a database that
// cannot take the run stops the command before it measures anything. Returns 0, or 2 with one
// line on err.
int prepare_history(const std::string& file, std::ostream& err);

// After the command wrote `result_json` (the envelope of docs/result-schema.md): appends it to
// `history` when one was asked for. The result stays whatever happens; a failure to append is
// one line on err and exit 2 (the database is the command's input), else 0.
int append_to_history_if_asked(const std::optional<std::string>& history,
                               const std::filesystem::path& result_json, std::ostream& out,
                               std::ostream& err);

// `audit checker` writes summary.json and verdicts.jsonl, not a result envelope: the run
// appended is {kind: "audit_checker", config: {checker}, records: the verdicts, summary}.
int append_audit_checker_to_history(const std::optional<std::string>& history,
                                    const std::filesystem::path& out_dir,
                                    const std::string& checker,
                                    const std::vector<std::string>& argv, std::ostream& out,
                                    std::ostream& err);

// compare --baseline-from FILE [--baseline-rev REV]: the BASE run document for NEW's suite,
// created before NEW (`before`).
// Throws history_error (reports/run_history.h).
nlohmann::json history_baseline(const std::string& file, const std::string& suite,
                                const std::optional<std::string>& revision,
                                const std::string& before);

} // namespace kg
