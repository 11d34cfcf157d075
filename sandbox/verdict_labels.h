// Which status a wrong answer earns, from what re-running it showed. A wrong answer alone does
// not say whether the kernel computes the wrong thing (INCORRECT_NUMERICAL), races
// (NONDETERMINISTIC), or answers from state kept across calls (REWARD_HACK); the failing call is
// re-run, several times in the same worker and several times in a fresh one, and these pure
// functions read the evidence (tests script it directly).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/eval_status.h"

namespace kg {

struct call_evidence {
  bool right = false; // within the protocol's tolerance of the oracle
  std::string bits;   // the output bytes (or a digest of them)
};

struct rerun_evidence {
  std::string original_bits;               // the failing call's output
  std::vector<call_evidence> same_worker;  // the same inputs again, back to back, same process
  std::vector<call_evidence> fresh_worker; // the same inputs as the first calls of a new process
};

struct verdict_label {
  eval_status status; // nondeterministic | reward_hack | incorrect_numerical
  std::string reason; // why, in a sentence
};

// - identical calls back to back disagree with each other: NONDETERMINISTIC (the original call
//   was wrong, so the output varies and is sometimes wrong);
// - the first call of a fresh process is right: REWARD_HACK (wrong only after earlier calls);
// - repeated calls are right where the original (after other inputs) was wrong: REWARD_HACK;
// - a rerun whose output differs from the original's bits yet is wrong the same stable way in
//   both processes: still INCORRECT_NUMERICAL (the fault does not depend on earlier calls);
// - otherwise INCORRECT_NUMERICAL. No rerun evidence at all: INCORRECT_NUMERICAL.
verdict_label label_wrong_answer(const rerun_evidence& e);

// A check that failed while timed (or in the pairs), with the worker's re-runs of that input set
// on an idle stream ({"reruns", "wrong", "differed_from_first"}): NONDETERMINISTIC when the
// re-runs disagree with each other and some are wrong, else REWARD_HACK (right when verified,
// wrong when timed).
verdict_label label_timed_failure(const nlohmann::json& diagnosis, const std::string& what);

} // namespace kg
