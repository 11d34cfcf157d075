// `kernelgate audit merge DIR... --out DIR`: the folders of several `audit checker --protocol`
// runs (parts of a catalog audited one after another, by --tasks, on one GPU or several) as one
// audit. The kill matrices merge cell by cell (mutants/kill_matrix.h: a cell two parts both judged
// must agree); the scores, families, escapes and false rejections are computed again over the
// merged matrix, the parts' phase times are summed (their wall time had they run back to back),
// and verdicts.jsonl and witnesses.jsonl are the parts' lines, each row once.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace kg {

struct audit_merge_options {
  std::vector<std::string> dirs; // `audit checker --protocol` output folders
  std::string out;
};

// Exit 0 when every part finished and every control was accepted by every protocol; 1 when a
// protocol rejected a correct kernel or a part was interrupted (its verdicts still count); 2 for
// bad input (no folder, a missing or malformed summary.json or kill_matrix.json, a folder that is
// not a --protocol audit, two parts that disagree on a cell or a row, an unwritable --out), one
// line.
int run_audit_merge_command(const audit_merge_options& o, std::ostream& out, std::ostream& err);

} // namespace kg
