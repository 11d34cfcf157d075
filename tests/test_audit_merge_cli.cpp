// `kernelgate audit merge`: hand-made parts of a protocol audit (kill matrices, summaries, lines)
// whose merged scores are counted here by hand.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "mutants/kill_matrix.h"
#include "scratch_dir.h"
#include "suite/exit_codes.h"

namespace fs = std::filesystem;
namespace exit_code = kg::exit_code;
using kg::kill_matrix;
using kg::kill_row;
using kg::kill_verdict;
using kg::witness_status;
using kg::test::run;

namespace {

struct cell {
  std::string id, family, task;
  bool control;
  witness_status status;
  char kernelbench, strict; // verdict letters, '.' none
};

// A part folder: its summary (the --protocol schema), kill matrix and verdict/witness lines.
fs::path write_part(const std::string& name, const std::vector<cell>& cells, double compile,
                    double judging, const std::string& status = "complete",
                    const std::string& schema = "kernelgate.audit.protocols/1") {
  const auto dir = kg::test::scratch_dir("audit-merge") / name;
  fs::create_directories(dir);
  std::vector<kill_row> rows;
  for (const auto& c : cells)
    rows.push_back({c.id, c.family, c.task, c.status, c.control});
  kill_matrix km(rows, {"kernelbench", "strict"});
  std::ofstream verdicts(dir / "verdicts.jsonl"), witnesses(dir / "witnesses.jsonl");
  for (const auto& c : cells) {
    if (c.kernelbench != '.') km.set(c.id, "kernelbench", static_cast<kill_verdict>(c.kernelbench));
    if (c.strict != '.') km.set(c.id, "strict", static_cast<kill_verdict>(c.strict));
    verdicts << nlohmann::json{{"row", c.id}, {"task", c.task}, {"part", name}}.dump() << "\n";
    witnesses << nlohmann::json{{"id", c.id}, {"part", name}}.dump() << "\n";
  }
  std::ofstream(dir / "kill_matrix.json") << km.to_json().dump() << "\n";
  std::ofstream(dir / "summary.json") << nlohmann::json{{"schema", schema},
                                                        {"status", status},
                                                        {"tasks", 1},
                                                        {"phases_seconds",
                                                         {{"compile", compile},
                                                          {"witness_and_protocols", judging},
                                                          {"total", compile + judging}}}}
                                             .dump()
                                      << "\n";
  return dir;
}

const auto W = witness_status::witnessed;
const auto U = witness_status::unwitnessed;

// relu: a control both accept, 3 witnessed arithmetic mutants (kernelbench lets 1 through),
// one unwitnessed. softmax: a control, 2 witnessed precision mutants kernelbench lets through,
// strict kills.
std::vector<cell> relu_part() {
  return {{"control:relu.cu", "", "relu", true, W, 'S', 'S'},
          {"a1", "arithmetic", "relu", false, W, 'K', 'K'},
          {"a2", "arithmetic", "relu", false, W, 'K', 'K'},
          {"a3", "arithmetic", "relu", false, W, 'S', 'K'},
          {"u1", "arithmetic", "relu", false, U, 'S', 'S'}};
}
std::vector<cell> softmax_part() {
  return {{"control:softmax.cu", "", "softmax", true, W, 'S', 'S'},
          {"p1", "precision", "softmax", false, W, 'S', 'K'},
          {"p2", "precision", "softmax", false, W, 'S', 'K'}};
}

nlohmann::json read(const fs::path& f) {
  std::ifstream in(f);
  return nlohmann::json::parse(in);
}

int line_count(const fs::path& f) {
  std::ifstream in(f);
  int n = 0;
  for (std::string l; std::getline(in, l);)
    ++n;
  return n;
}

} // namespace

TEST(audit_merge_cli, two_parts_score_as_one_audit_with_their_phases_summed) {
  const auto a = write_part("relu", relu_part(), 10, 100);
  const auto b = write_part("softmax", softmax_part(), 5, 50);
  const auto out = kg::test::scratch_dir("audit-merge") / "merged";
  const auto r = run({"audit", "merge", a.string(), b.string(), "--out", out.string()});
  ASSERT_EQ(r.rc, exit_code::ok) << r.err << r.out;
  const auto s = read(out / "summary.json");
  EXPECT_EQ(s["schema"], "kernelgate.audit.merged/1");
  EXPECT_EQ(s["status"], "complete");
  // kernelbench: 5 witnessed, killed a1 a2, survived a3 p1 p2; strict kills all 5.
  const auto& kb = s["protocols"]["kernelbench"];
  EXPECT_EQ(kb["score"]["intended"], 5);
  EXPECT_EQ(kb["score"]["killed"], 2);
  EXPECT_EQ(kb["score"]["survived"], 3);
  EXPECT_EQ(kb["families"]["arithmetic"]["survived"], 1);
  EXPECT_EQ(kb["families"]["precision"]["survived"], 2);
  EXPECT_EQ(kb["escapes"].size(), 3u);
  EXPECT_TRUE(kb["valid"]);
  EXPECT_EQ(s["protocols"]["strict"]["score"]["killed"], 5);
  EXPECT_EQ(s["protocols"]["strict"]["escapes"].size(), 0u);
  EXPECT_EQ(s["witness_statuses"]["witnessed"], 5);
  EXPECT_EQ(s["witness_statuses"]["unwitnessed"], 1);
  EXPECT_DOUBLE_EQ(s["phases_seconds_summed"]["compile"].get<double>(), 15);
  EXPECT_DOUBLE_EQ(s["phases_seconds_summed"]["witness_and_protocols"].get<double>(), 150);
  EXPECT_DOUBLE_EQ(s["phases_seconds_summed"]["total"].get<double>(), 165);
  EXPECT_EQ(s["parts"].size(), 2u);
  EXPECT_TRUE(s.contains("published_reference"));
  EXPECT_TRUE(s["environment"].is_object());
  // The table: kernelbench lets 3 of 5 through, 60.0%.
  EXPECT_NE(r.out.find("all                 5 |  60.0%"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("every correct kernel accepted by every protocol"), std::string::npos);
  const auto km = kill_matrix::from_json(read(out / "kill_matrix.json"));
  EXPECT_EQ(km.rows().size(), 8u);
  EXPECT_EQ(km.at("p2", "kernelbench"), kill_verdict::survived);
  EXPECT_EQ(line_count(out / "verdicts.jsonl"), 8);
  EXPECT_EQ(line_count(out / "witnesses.jsonl"), 8);
}

TEST(audit_merge_cli, a_part_given_twice_counts_each_row_once) {
  const auto a = write_part("relu-twice", relu_part(), 10, 100);
  const auto out = kg::test::scratch_dir("audit-merge") / "twice";
  const auto r = run({"audit", "merge", a.string(), a.string(), "--out", out.string()});
  ASSERT_EQ(r.rc, exit_code::ok) << r.err;
  const auto s = read(out / "summary.json");
  EXPECT_EQ(s["protocols"]["kernelbench"]["score"]["intended"], 3);
  EXPECT_EQ(line_count(out / "verdicts.jsonl"), 5);
}

TEST(audit_merge_cli, a_rejected_control_or_an_interrupted_part_exits_1) {
  auto cells = softmax_part();
  cells[0].strict = 'K'; // strict rejects softmax's correct kernel
  const auto bad = write_part("rejects", cells, 1, 1);
  const auto out = kg::test::scratch_dir("audit-merge") / "rejects-out";
  auto r = run({"audit", "merge", bad.string(), "--out", out.string()});
  EXPECT_EQ(r.rc, exit_code::failures) << r.err;
  EXPECT_NE(r.out.find("strict rejected a correct kernel: invalid for softmax"), std::string::npos)
      << r.out;
  EXPECT_FALSE(read(out / "summary.json")["protocols"]["strict"]["valid"]);

  const auto cut = write_part("cut", relu_part(), 1, 1, "interrupted");
  r = run({"audit", "merge", cut.string(), "--out", out.string()});
  EXPECT_EQ(r.rc, exit_code::failures) << r.err;
  EXPECT_EQ(read(out / "summary.json")["status"], "incomplete");
}

TEST(audit_merge_cli, bad_input_is_one_line_and_exit_2) {
  const auto a = write_part("good", relu_part(), 1, 1);
  auto other = relu_part();
  other[3].kernelbench = 'K'; // a3: killed here, survived in `good`
  const auto clash = write_part("clash", other, 1, 1);
  const auto cmd = write_part("cmd", relu_part(), 1, 1, "complete", "kernelgate.audit.checker/1");
  const auto empty = kg::test::scratch_dir("audit-merge") / "empty";
  fs::create_directories(empty);
  const auto out = kg::test::scratch_dir("audit-merge") / "bad-out";
  struct bad_case {
    std::vector<std::string> dirs;
    std::string says;
  };
  for (const auto& c : std::vector<bad_case>{
           {{a.string(), clash.string()}, "'a3' x 'kernelbench' is survived in one run"},
           {{a.string(), cmd.string()}, "is not the summary of an `audit checker --protocol`"},
           {{empty.string()}, "cannot read"},
       }) {
    std::vector<std::string> args = {"audit", "merge"};
    args.insert(args.end(), c.dirs.begin(), c.dirs.end());
    args.insert(args.end(), {"--out", out.string()});
    const auto r = run(args);
    EXPECT_EQ(r.rc, exit_code::bad_input) << c.says << ": " << r.err;
    EXPECT_EQ(kg::test::lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out / "summary.json")) << c.says;
  }
  // An --out that cannot be a folder (a file is there).
  const auto file = kg::test::scratch_dir("audit-merge") / "a-file";
  std::ofstream(file) << "x";
  const auto r = run({"audit", "merge", a.string(), "--out", (file / "sub").string()});
  EXPECT_EQ(r.rc, exit_code::bad_input) << r.err;
  EXPECT_EQ(kg::test::lines(r.err), 1) << r.err;
}
