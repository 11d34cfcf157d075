// The parts of `kernelgate audit checker --cmd` that `kernelgate merge` shares with it: the plan
// (kill matrix rows and the candidates called), the identity shards of one audit must share, the
// verdict lines of verdicts.jsonl, and the scores, files and table written at the end.
#pragma once

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mutants/kill_matrix.h"
#include "suite/audit_checker_command.h"
#include "suite/audit_inputs.h"

namespace kg {

// One candidate the checker judges.
struct checker_candidate {
  std::string row; // the kill matrix row: a mutant id or "control:<path>"
  std::string task, source;
};

// The kill matrix rows (controls, then every mutant with its witness status) and the candidates
// called (the controls and the witnessed mutants, or o.sample of them: see sample_witnessed), in
// that order; "" or what is wrong.
std::string checker_audit_plan(const audit_inputs& in, const audit_checker_options& o,
                               std::vector<kill_row>& rows, std::vector<checker_candidate>& work);

// A checker too slow for every witnessed mutant (a Python process and an nvcc call each, some
// seconds) judges a sample: `size` of the witnessed ids, stratified by task (each task's share in
// proportion to its witnessed mutants, largest remainders first), within a task the first by
// SHA-256 of "<seed>:<id>" -- the same sample on every machine. Every id when size is 0 or at
// least their number. Returns the chosen ids in the order of those hashes (the calls' order, with
// the tasks mixed: an audit stopped early has judged a random part of its sample); without a
// sample, in the catalog's order.
std::vector<std::string>
sample_witnessed(const std::vector<std::pair<std::string, std::string>>& task_and_id,
                 std::size_t size, std::uint64_t seed);

// The command, catalog, witnesses, sources, tasks and timeout (paths absolute), and the options
// they came from.
nlohmann::json checker_audit_identity(const audit_checker_options& o, const audit_inputs& in,
                                      double timeout);
audit_checker_options checker_options_of(const nlohmann::json& identity); // throws json errors

// summary.json's "sample" (null when every witnessed mutant is called): the size asked for, the
// seed, the witnessed mutants and those called.
nlohmann::json checker_sample_json(const audit_checker_options& o,
                                   const std::vector<kill_row>& rows,
                                   const std::vector<checker_candidate>& work);

nlohmann::json verdict_line(const std::string& row, const std::string& task, kill_verdict v,
                            const std::string& detail, double seconds);
kill_verdict verdict_of_line(const nlohmann::json& line); // throws std::invalid_argument

// Writes kill_matrix.json, report.mutation.json and summary.json (with `extra`'s fields) into
// dir and prints the family table; exit 0, 1 when a control was rejected, 2 when a file cannot
// be written.
int finish_checker_audit(const std::filesystem::path& dir, const kill_matrix& km,
                         const audit_inputs& in, const nlohmann::json& checker, std::size_t calls,
                         double seconds, const nlohmann::json& extra, std::ostream& out,
                         std::ostream& err);

} // namespace kg
