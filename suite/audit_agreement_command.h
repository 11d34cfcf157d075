// `kernelgate audit agreement A B`: do two audited checkers give the same verdicts? A and B are
// `audit checker` output folders (or their kill_matrix.json files); --checkers names the column
// of each (default: a folder's only column). Prints the agreement over the candidates both
// judged, with its Wilson interval, what was left out and why, and every difference with each
// side's reason from the folders' verdicts.jsonl. The use it was made for: an outside checker
// audited with --cmd against the built-in protocol that models the same rule.
#pragma once

#include <ostream>
#include <string>

namespace kg {

struct audit_agreement_options {
  std::string first, second; // folders or kill_matrix.json files
  std::string checkers;      // "A,B", "A" (both), or empty (each side's only column)
  std::string json;          // also write the comparison here (atomically)
  double min_agreement = 0;  // > 0: exit 1 below it
};

// Exit 0; 1 when the agreement is below --min-agreement (or nothing could be compared while it
// was asked); 2 for bad input (a missing or malformed matrix, an unknown or ambiguous column, rows
// that are not the same candidates, an unwritable --json), one line.
int run_audit_agreement_command(const audit_agreement_options& o, std::ostream& out,
                                std::ostream& err);

} // namespace kg
