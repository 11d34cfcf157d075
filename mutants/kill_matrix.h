// The kill matrix of a checker audit: one row per mutant, one column per checker (a protocol
// `kernelgate protocols` lists, or an outside command), one verdict per cell. Only a witnessed
// mutant (one the fp64 oracle shows wrong on some input) can be an escape: the others are kept
// with their status and reason and never counted. A cell never observed is missing -- unknown,
// not a kill -- so every score keeps two denominators: intended (the witnessed mutants) and
// aligned (those the checker gave a verdict on), with the reason for each exclusion.
//
// Stored as JSON: the rows (id, family, task, status), the columns, and per column one string of
// verdict letters in row order -- 4,339 mutants x 7 checkers is 30 kB -- so a matrix reloads
// whole, and two runs' matrices merge cell by cell.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "stats/proportion.h"

namespace kg {

// What the oracle said about a mutant before any checker saw it.
enum class witness_status {
  witnessed,     // some input shows it wrong: it must be rejected
  unwitnessed,   // no input tried shows it wrong: never counted as an escape
  equivalent,    // its SASS equals the original's: not run
  compile_error, // it does not compile: no checker can pay for it
  not_run,       // planned, not yet witnessed
};
std::string_view witness_status_name(witness_status s);
witness_status witness_status_from_name(std::string_view name); // throws std::invalid_argument

// A checker's verdict on one candidate, one letter each in storage.
enum class kill_verdict : char {
  killed = 'K',   // rejected
  survived = 'S', // accepted: an escape when the mutant is witnessed
  error = 'E',    // the checker itself failed (crashed, malformed answer): recorded as such
  timeout = 'T',  // the checker did not answer in time
  missing = '.',  // never observed
};
std::string_view kill_verdict_name(kill_verdict v);

struct kill_row {
  std::string id; // the mutant's id, or "control:<name>" for a correct kernel
  std::string family, task;
  witness_status status = witness_status::not_run;
  bool control = false; // a correct kernel: every checker must accept it
  bool operator==(const kill_row&) const = default;
};

// A checker's score over the witnessed mutants (or one family of them).
struct checker_score {
  int intended = 0; // witnessed mutants
  int killed = 0, survived = 0, errors = 0, timeouts = 0, missing = 0;
  int aligned() const { return killed + survived; } // mutants with a verdict
  double mutation_score() const;                    // killed / aligned (0 when none)
  interval score_ci95() const;                      // Wilson, over aligned
  double escape_rate() const;                       // survived / aligned
  interval escape_ci95() const;
  nlohmann::json to_json() const;
};

class kill_matrix {
public:
  kill_matrix() = default;
  // Rows with unique ids; columns with unique names. Every cell starts missing.
  kill_matrix(std::vector<kill_row> rows, std::vector<std::string> checkers);

  const std::vector<kill_row>& rows() const { return rows_; }
  const std::vector<std::string>& checkers() const { return checkers_; }
  std::size_t row_index(std::string_view id) const;       // throws std::out_of_range
  std::size_t checker_index(std::string_view name) const; // throws std::out_of_range
  kill_verdict at(std::string_view id, std::string_view checker) const;
  void set(std::string_view id, std::string_view checker, kill_verdict v);
  void set_status(std::string_view id, witness_status s);

  // Over witnessed mutants (controls excluded); family "" is every family.
  checker_score score(std::string_view checker, std::string_view family = "") const;
  std::map<std::string, checker_score> score_by_family(std::string_view checker) const;
  // The controls this checker did not accept (a killed, error or timeout verdict): each makes the
  // checker invalid for that control's task.
  std::vector<const kill_row*> false_rejections(std::string_view checker) const;
  // The witnessed mutants it accepted.
  std::vector<const kill_row*> escapes(std::string_view checker) const;

  nlohmann::json to_json() const;
  // Throws std::invalid_argument naming what is malformed (an unknown status or verdict letter, a
  // verdict string whose length is not the row count, a repeated id or checker).
  static kill_matrix from_json(const nlohmann::json& j);

  // This matrix and another run's, cell by cell: rows and columns are the union; a cell observed
  // in one run only keeps that verdict; observed in both, the verdicts must agree (a checker that
  // answers differently for the same candidate is reported, not averaged away: throws
  // std::invalid_argument naming the cell). A row's witness status: the more informative one
  // (not_run yields to any other); two different informative statuses throw. A row present in both
  // with different family, task or control flag throws.
  static kill_matrix merge(const kill_matrix& a, const kill_matrix& b);

private:
  std::vector<kill_row> rows_;
  std::vector<std::string> checkers_;
  std::map<std::string, std::size_t, std::less<>> row_of_, checker_of_;
  std::vector<std::string> cells_; // per checker, one verdict letter per row
  void index();
};

} // namespace kg
