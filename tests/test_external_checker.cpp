// `audit checker --cmd`'s outside-checker call (sandbox/external_checker.h) with small shell
// checkers: accept-all, reject-all, one that crashes, one that hangs, one that reads the files it
// is given; and the command template's placeholders and quoting.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "sandbox/external_checker.h"
#include "scratch_dir.h"

using namespace kg;
namespace fs = std::filesystem;

namespace {

struct files {
  fs::path task, candidate, workdir;
};

// A task file and a candidate in a folder whose name has a space and a quote (the shell quoting
// must carry them through).
files make_files(const std::string& name, const std::string& candidate_text) {
  const auto dir = kg::test::scratch_dir("external-checker") / (name + " it's");
  fs::create_directories(dir);
  files f{dir / "task.json", dir / "cand.cu", dir / "work"};
  std::ofstream(f.task) << "{\"name\": \"relu\"}\n";
  std::ofstream(f.candidate) << candidate_text;
  return f;
}

checker_answer call(const std::string& cmd, const files& f, double timeout = 10) {
  return run_external_checker(cmd, f.task, f.candidate, f.workdir, timeout);
}

} // namespace

TEST(external_checker, exit_0_accepts_exit_1_rejects_anything_else_is_an_error) {
  const auto f = make_files("codes", "__global__ void k() {}\n");
  EXPECT_EQ(call("exit 0 # {candidate}", f).verdict, kill_verdict::survived);
  EXPECT_EQ(call("exit 1 # {candidate}", f).verdict, kill_verdict::killed);
  const auto other = call("exit 3 # {candidate}", f);
  EXPECT_EQ(other.verdict, kill_verdict::error);
  EXPECT_NE(other.detail.find("exit code 3"), std::string::npos) << other.detail;
  // A checker that crashes: a signal is an error, never a rejection.
  const auto crash = call("kill -SEGV $$ # {candidate}", f);
  EXPECT_EQ(crash.verdict, kill_verdict::error);
  EXPECT_NE(crash.detail.find("signal"), std::string::npos) << crash.detail;
}

TEST(external_checker, a_hanging_checker_is_a_timeout_and_its_children_die_with_it) {
  const auto f = make_files("hang", "x\n");
  const auto t0 = std::chrono::steady_clock::now();
  // The shell starts a child that would outlive it; the process group goes down together.
  const auto a = call("sleep 30 & echo $! > {workdir}/child; sleep 30; echo {candidate}", f, 0.5);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(a.verdict, kill_verdict::timeout);
  EXPECT_LT(s, 10.0);
  int child = 0;
  std::ifstream(f.workdir / "child") >> child;
  ASSERT_GT(child, 0);
  // Gone, or a zombie waiting for its new parent to reap it: either way no longer running.
  auto running = [&] {
    std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
    std::string pid, comm, state;
    return stat >> pid >> comm >> state && state != "Z" && state != "X";
  };
  for (int i = 0; i < 100 && running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(running()) << "the checker's child " << child << " outlived the timeout";
}

TEST(external_checker, the_checker_gets_the_task_the_candidate_and_a_scratch_folder) {
  // Rejects a candidate containing MUTATED, accepts others; writes into its workdir and reads the
  // task file: the three paths arrive intact despite the space and the quote in them.
  const std::string cmd =
      "grep -q relu {task} && touch {workdir}/seen && ! grep -q MUTATED {candidate}";
  const auto good = make_files("good", "__global__ void k() {}\n");
  EXPECT_EQ(call(cmd, good).verdict, kill_verdict::survived);
  EXPECT_TRUE(fs::exists(good.workdir / "seen"));
  EXPECT_TRUE(fs::exists(good.workdir / "checker.log"));
  const auto bad = make_files("bad", "// MUTATED\n__global__ void k() {}\n");
  EXPECT_EQ(call(cmd, bad).verdict, kill_verdict::killed);
  // What it prints goes to checker.log.
  const auto talk = make_files("talk", "x\n");
  EXPECT_EQ(call("echo checking {candidate}; exit 0", talk).verdict, kill_verdict::survived);
  EXPECT_NE(kg::test::slurp(talk.workdir / "checker.log").find("checking"), std::string::npos);
}

TEST(external_checker, the_command_template_is_checked_before_anything_runs) {
  const fs::path t = "/t/task.json", c = "/c/a'b.cu", w = "/w";
  EXPECT_EQ(expand_checker_command("py check.py {task} {candidate} {workdir}", t, c, w),
            "py check.py '/t/task.json' '/c/a'\\''b.cu' '/w'");
  EXPECT_EQ(expand_checker_command("awk '{{print}}' {candidate}", t, c, w),
            "awk '{print}' '/c/a'\\''b.cu'");
  for (const auto* bad :
       {"check {task}", "check {candidate} {shape}", "check {candidate", "check } {candidate}", ""})
    EXPECT_THROW(expand_checker_command(bad, t, c, w), checker_command_error) << bad;
}
