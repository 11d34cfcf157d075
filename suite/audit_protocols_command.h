// `kernelgate audit checker --protocol NAME[,NAME...]|all`: the built-in protocols audited on the
// GPU over a mutant catalog, end to end, in three timed phases:
//   compile  every mutant and every correct kernel it came from (the controls), in parallel,
//            through the candidate compiler's content-hash cache, in the audit's order;
//   audit    each candidate once on the GPU (sandbox/mutant_audit.h): the task's witness plan
//            against the fp64 oracle (witnessed / unwitnessed, the input that shows it) and each
//            protocol's own trials, judged by its own rule -- on several workers at once, each
//            candidate as soon as it is compiled (once every control is: the two overlap);
//   report   the kill matrix (a column per protocol), a mutation-testing report per protocol,
//            the smallest input suite per task that kills every witnessed mutant (chosen on the
//            development split, scored on the held-out one), and the scores.
// Outputs in OUT: witnesses.jsonl and verdicts.jsonl (streamed, a line per candidate),
// kill_matrix.json, report.<protocol>.mutation.json, input_suites.json, summary.json; the family x
// protocol table of escape rates on the terminal.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "suite/audit_checker_command.h"

namespace kg {

// Exit 0 when every control was accepted by every protocol; 1 when a protocol rejected a correct
// kernel (listed: that protocol is invalid for the task); 2 bad input (one line, nothing run);
// 3 no GPU; 130 interrupted (what was measured is kept).
int run_audit_protocols_command(const audit_checker_options& o, std::ostream& out,
                                std::ostream& err);

// The order the audit judges its candidates in, as indices into `task` / `control` (the
// candidates in task order, each task's controls before its mutants). A task's mutants wait for
// its controls (their slowest call sets the mutants' per-call limit), so each task's controls are
// moved ahead of the mutants of the tasks before it: `lead` mutants of earlier tasks come between
// a control and its task's first mutant (fewer only at the start), and the workers finishing a
// task find the next one's controls already run. lead 0 keeps the order given; a task's mutants
// keep their order and stay after its controls.
std::vector<std::size_t> audit_judging_order(const std::vector<std::string>& task,
                                             const std::vector<bool>& control, std::size_t lead);

} // namespace kg
