#include "sandbox/verdict_labels.h"

namespace kg {
namespace {

struct spread {
  int wrong = 0, distinct = 0;
};

spread read(const std::vector<call_evidence>& calls) {
  spread s;
  std::vector<const std::string*> seen;
  for (const auto& c : calls) {
    s.wrong += c.right ? 0 : 1;
    bool known = false;
    for (const auto* b : seen)
      known = known || *b == c.bits;
    if (!known) seen.push_back(&c.bits);
  }
  s.distinct = static_cast<int>(seen.size());
  return s;
}

std::string count(int n, const char* what) {
  return std::to_string(n) + " " + what;
}

} // namespace

verdict_label label_wrong_answer(const rerun_evidence& e) {
  const spread same = read(e.same_worker), fresh = read(e.fresh_worker);
  const int calls = static_cast<int>(e.same_worker.size() + e.fresh_worker.size());
  // The original call was wrong: identical calls that disagree make the kernel one whose output
  // varies and is sometimes wrong, whether or not a re-run was wrong too.
  if (same.distinct > 1 || fresh.distinct > 1)
    return {eval_status::nondeterministic,
            "identical calls on the failing inputs gave different outputs (" +
                count(same.distinct, "distinct in the same process") + ", " +
                count(fresh.distinct, "in a fresh one") + "; " +
                count(same.wrong + fresh.wrong, "of") + " " + std::to_string(calls) +
                " re-runs wrong)"};
  if (!e.fresh_worker.empty() && e.fresh_worker.front().right)
    return {eval_status::reward_hack,
            "right as the first call of a fresh process, wrong after earlier calls "
            "on other inputs: the answer depends on state kept across calls"};
  if (!e.same_worker.empty() && same.wrong == 0)
    return {eval_status::reward_hack,
            "right when called again on the same inputs, wrong when they followed "
            "other inputs: the answer depends on state kept across calls"};
  return {eval_status::incorrect_numerical, ""};
}

verdict_label label_timed_failure(const nlohmann::json& diagnosis, const std::string& what) {
  const int wrong = diagnosis.value("wrong", 0), differ = diagnosis.value("differed_from_first", 0);
  if (differ > 0 && wrong > 0)
    return {eval_status::nondeterministic,
            what + "; re-run " + std::to_string(diagnosis.value("reruns", 0)) +
                " times on an idle stream, its outputs differed from each other (" +
                std::to_string(wrong) + " wrong)"};
  return {eval_status::reward_hack, "while timed: " + what};
}

} // namespace kg
