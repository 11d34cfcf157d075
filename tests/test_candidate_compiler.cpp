// Child processes and the candidate compiler (nvcc runs on CPU-only machines too).
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "reports/remove_tree.h"
#include "sandbox/candidate_compiler.h"
#include "sandbox/process.h"
#include "sandbox/symbol_scan.h"

using namespace kg;
namespace fs = std::filesystem;

namespace {
fs::path scratch(const std::string& name) {
  // The process's own folder, removed when the test process ends: tests leave nothing in /tmp.
  static const struct root {
    fs::path p = fs::temp_directory_path() / ("kg-cc-" + std::to_string(::getpid()));
    ~root() { remove_tree(p); }
  } r;
  const fs::path d = r.p / name;
  remove_tree(d);
  fs::create_directories(d);
  return d;
}
} // namespace

TEST(process, exit_codes_signals_and_timeouts_are_reported_not_suffered) {
  const auto d = scratch("proc");
  auto r = run_process({"sh", "-c", "echo hello; exit 3"}, d / "a.log");
  EXPECT_TRUE(r.exited);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(file_tail(d / "a.log").find("hello"), std::string::npos);
  r = run_process({"sh", "-c", "kill -SEGV $$"}, d / "b.log");
  EXPECT_FALSE(r.exited);
  EXPECT_EQ(r.signal, 11);
  EXPECT_NE(r.describe().find("signal 11"), std::string::npos) << r.describe();
  // A child that hangs, and a grandchild it started, are both gone after the timeout.
  r = run_process({"sh", "-c", "sleep 30 & sleep 30"}, d / "c.log", {.timeout_seconds = 0.5});
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(r.seconds, 5.0);
  EXPECT_THROW(run_process({"sh"}, "/nonexistent-dir/x.log"), std::runtime_error);
}

TEST(process, an_end_by_a_job_managers_signal_is_told_from_the_childs_own) {
  const auto d = scratch("job-signal");
  // SIGTERM, SIGINT, SIGHUP directly, or as a shell's 128+n for a child they ended.
  for (const char* cmd :
       {"kill -TERM $$", "kill -INT $$", "kill -HUP $$", "exit 143", "exit 130", "exit 129"})
    EXPECT_TRUE(run_process({"sh", "-c", cmd}, d / "a.log").ended_by_job_signal()) << cmd;
  // A crash, SIGKILL, an ordinary exit, and our own timeout are not.
  for (const char* cmd : {"kill -SEGV $$", "exit 139", "kill -KILL $$", "exit 1", "exit 0"})
    EXPECT_FALSE(run_process({"sh", "-c", cmd}, d / "b.log").ended_by_job_signal()) << cmd;
  EXPECT_FALSE(run_process({"sh", "-c", "sleep 5"}, d / "c.log", {.timeout_seconds = 0.2})
                   .ended_by_job_signal());
}

TEST(candidate_compiler, compiles_in_parallel_then_hits_the_cache) {
  compile_options o;
  o.cache_dir = scratch("cache");
  std::vector<fs::path> src;
  for (const char* t : {"relu", "softmax_lastdim", "rmsnorm_weight", "residual_add_rmsnorm"})
    src.push_back(fs::path(KG_SOURCE_DIR) / "kernels" / "tasks" / (std::string(t) + ".cu"));
  const auto first = compile_candidates(src, o);
  for (const auto& r : first) {
    EXPECT_TRUE(r.ok) << r.source << ": " << r.log;
    EXPECT_FALSE(r.cached);
    EXPECT_TRUE(fs::exists(r.shared_object));
    EXPECT_EQ(r.key.size(), 64u);
  }
  const auto again = compile_candidates(src, o);
  for (std::size_t k = 0; k < src.size(); ++k) {
    EXPECT_TRUE(again[k].cached) << src[k];
    EXPECT_EQ(again[k].key, first[k].key);
  }
  EXPECT_NE(first[0].key, first[1].key);
  // The flags every candidate gets: Hopper's sm_90a and the ABI include folder.
  const auto& cmd = first[0].command;
  EXPECT_NE(std::find(cmd.begin(), cmd.end(), "-gencode=arch=compute_90a,code=sm_90a"), cmd.end());
}

TEST(candidate_compiler, a_compile_error_keeps_the_compilers_message) {
  compile_options o;
  o.cache_dir = scratch("bad");
  const auto f = scratch("src") / "broken.cu";
  std::ofstream(f)
      << "#include \"kg_candidate.h\"\nextern \"C\" int kg_run(const kg_tensor* in, "
         "int n_in, kg_tensor* out, int n_out, cudaStream_t s) { return undeclared_x; }\n";
  const auto r = compile_candidate(f, o);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.log.find("undeclared_x"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("exit code"), std::string::npos) << r.log;
  // Not cached as good: a second attempt compiles (and fails) again.
  EXPECT_FALSE(compile_candidate(f, o).cached);
}

// The red-team candidates that break the rules in their imports are caught before they run;
// the task's own kernels import nothing forbidden.
TEST(symbol_scan, forbidden_imports_of_red_team_candidates_are_named) {
  compile_options o;
  o.cache_dir = scratch("scan");
  const fs::path red = fs::path(KG_SOURCE_DIR) / "tests" / "red_team" / "relu";
  const std::vector<fs::path> src = {red / "calls_cublas.cu", red / "spawns_thread.cu",
                                     red / "touches_timer.cu",
                                     fs::path(KG_SOURCE_DIR) / "kernels" / "tasks" / "relu.cu"};
  const auto built = compile_candidates(src, o);
  std::vector<std::vector<forbidden_import>> found;
  for (const auto& b : built) {
    ASSERT_TRUE(b.ok) << b.source << ": " << b.log;
    const auto imports = imported_symbols(b.shared_object);
    ASSERT_TRUE(imports.has_value());
    found.push_back(forbidden_imports(*imports, false));
  }
  ASSERT_FALSE(found[0].empty());
  EXPECT_EQ(found[0][0].symbol, "cublasCreate_v2");
  EXPECT_EQ(found[0][0].why, "calls cuBLAS");
  ASSERT_FALSE(found[1].empty());
  EXPECT_NE(found[1][0].why.find("threads"), std::string::npos);
  ASSERT_FALSE(found[2].empty());
  EXPECT_NE(found[2][0].why.find("timer"), std::string::npos);
  EXPECT_TRUE(found[3].empty()) << found[3][0].symbol;
  // Where a task allows library calls, cuBLAS is fine; the timer never is.
  EXPECT_TRUE(forbidden_imports({"cublasCreate_v2"}, true).empty());
  EXPECT_FALSE(forbidden_imports({"cudaEventRecord"}, true).empty());
}

// Every verified task kernel, and every variant in kernels/variants/<task>/, compiles for sm_90a
// (on CPU-only machines too) and imports nothing a candidate may not: the substrates obey the
// rules the candidates are held to.
TEST(candidate_compiler, every_task_kernel_compiles_and_imports_nothing_forbidden) {
  compile_options o;
  o.cache_dir = scratch("all");
  std::vector<fs::path> src;
  for (const auto& e : fs::directory_iterator(fs::path(KG_SOURCE_DIR) / "kernels" / "tasks"))
    if (e.path().extension() == ".cu") src.push_back(e.path());
  ASSERT_GE(src.size(), 4u);
  for (const auto& e :
       fs::recursive_directory_iterator(fs::path(KG_SOURCE_DIR) / "kernels" / "variants"))
    if (e.path().extension() == ".cu") src.push_back(e.path());
  for (const auto& b : compile_candidates(src, o)) {
    ASSERT_TRUE(b.ok) << b.source << ": " << b.log;
    const auto imports = imported_symbols(b.shared_object);
    ASSERT_TRUE(imports.has_value()) << b.source;
    const auto bad = forbidden_imports(*imports, false);
    EXPECT_TRUE(bad.empty()) << b.source << " imports " << bad.front().symbol;
  }
}
