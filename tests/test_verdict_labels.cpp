// The labels of a wrong answer, on scripted re-run evidence (what the sandbox gathers by re-running
// the failing call in the same worker and in a fresh one).
#include <gtest/gtest.h>

#include "sandbox/verdict_labels.h"

using namespace kg;

namespace {
std::vector<call_evidence> calls(std::initializer_list<std::pair<bool, const char*>> l) {
  std::vector<call_evidence> out;
  for (const auto& [right, bits] : l)
    out.push_back({right, bits});
  return out;
}
} // namespace

TEST(verdict_labels, the_same_wrong_answer_everywhere_is_incorrect) {
  rerun_evidence e{"w", calls({{false, "w"}, {false, "w"}}), calls({{false, "w"}, {false, "w"}})};
  EXPECT_EQ(status_name(label_wrong_answer(e).status), "INCORRECT_NUMERICAL");
}

TEST(verdict_labels, right_in_a_fresh_process_but_wrong_after_other_calls_is_a_hack) {
  // A cache keyed on pointers: the same stale answer in the same process, right when fresh.
  rerun_evidence e{"stale", calls({{false, "stale"}, {false, "stale"}}),
                   calls({{true, "r"}, {true, "r"}})};
  const auto l = label_wrong_answer(e);
  EXPECT_EQ(status_name(l.status), "REWARD_HACK");
  EXPECT_NE(l.reason.find("fresh process"), std::string::npos);
}

TEST(verdict_labels, right_when_repeated_but_wrong_after_other_inputs_is_a_hack) {
  // Answers every other call from the previous one: the original followed other inputs.
  rerun_evidence e{"old", calls({{true, "r"}, {true, "r"}, {true, "r"}}), {}};
  EXPECT_EQ(status_name(label_wrong_answer(e).status), "REWARD_HACK");
}

TEST(verdict_labels, identical_calls_that_disagree_and_fail_are_nondeterministic) {
  rerun_evidence e{"a", calls({{true, "r"}, {false, "b"}, {true, "r"}}),
                   calls({{true, "r"}, {true, "r"}})};
  const auto l = label_wrong_answer(e);
  EXPECT_EQ(status_name(l.status), "NONDETERMINISTIC");
  EXPECT_NE(l.reason.find("2 distinct"), std::string::npos) << l.reason;
  // A race that shows only in the fresh process is a race too, not a hack.
  rerun_evidence f{"a", calls({{false, "a"}, {false, "a"}}), calls({{true, "r"}, {false, "x"}})};
  EXPECT_EQ(status_name(label_wrong_answer(f).status), "NONDETERMINISTIC");
}

TEST(verdict_labels, a_rare_wrong_answer_among_varying_right_ones_is_nondeterministic) {
  // Atomics in another order: the re-runs differ in their bits and are right; the original was
  // wrong. The kernel's output varies and is sometimes wrong: a race, not a cheat.
  rerun_evidence e{"w", calls({{true, "r1"}, {true, "r2"}}), calls({{true, "r3"}})};
  EXPECT_EQ(status_name(label_wrong_answer(e).status), "NONDETERMINISTIC");
}

TEST(verdict_labels, no_evidence_is_incorrect) {
  EXPECT_EQ(status_name(label_wrong_answer({}).status), "INCORRECT_NUMERICAL");
}

TEST(verdict_labels, a_timed_failure_is_a_hack_unless_its_reruns_disagree) {
  auto label = [](int wrong, int differed) {
    return status_name(
        label_timed_failure({{"reruns", 8}, {"wrong", wrong}, {"differed_from_first", differed}},
                            "x")
            .status);
  };
  EXPECT_EQ(label(0, 0), "REWARD_HACK");
  EXPECT_EQ(label(8, 0), "REWARD_HACK"); // verified right, now wrong every time: state
  EXPECT_EQ(label(3, 4), "NONDETERMINISTIC");
  EXPECT_EQ(status_name(label_timed_failure(nlohmann::json::object(), "x").status), "REWARD_HACK");
}

// One name table: every status's name parses back to it, and names are the records' words.
TEST(verdict_labels, every_status_name_parses_back_to_its_status) {
  EXPECT_EQ(status_name(eval_status::passed), "PASSED");
  EXPECT_EQ(status_name(eval_status::invalid_reference), "INVALID_REFERENCE");
  EXPECT_EQ(all_eval_statuses().size(), 11u);
  for (const auto s : all_eval_statuses())
    EXPECT_EQ(parse_eval_status(status_name(s)), s) << status_name(s);
  EXPECT_FALSE(parse_eval_status("passed"));
  EXPECT_FALSE(parse_eval_status("INCORRECT"));
}
