// `kernelgate mutants generate` end to end: the catalog of kernels/tasks and kernels/variants
// (the issue's acceptance: at least 3,000 mutants in all seven families over at least 40 tasks,
// unique ids, the same bytes from two runs), every mutant applying to its file, the summary's
// counts, a user folder of candidates (DIR/TASK.cu, DIR/TASK/NAME.cu), and bad input: one line on
// stderr and exit 2. Scratch folders live under the build tree and are removed at the end.
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_run.h"
#include "mutants/mutant_catalog.h"
#include "scratch_dir.h"
#include "suite/cli.h"
#include "suite/exit_codes.h"
#include "suite/mutants_command.h"

namespace fs = std::filesystem;
using namespace kg;

namespace {

using kg::test::lines;
using kg::test::run;
using kg::test::run_result;

fs::path scratch() {
  return kg::test::scratch_dir("mutants-cli");
}
using kg::test::slurp;

std::vector<mutant> read_catalog(const fs::path& file) {
  std::vector<mutant> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);)
    out.push_back(mutant_from_json(nlohmann::json::parse(line)));
  return out;
}

} // namespace

TEST(mutants_cli, generate_over_the_task_kernels_and_variants_meets_the_issues_bar) {
  const fs::path out1 = scratch() / "all1", out2 = scratch() / "all2";
  const auto r = run({"mutants", "generate", "--out", out1.string()});
  ASSERT_EQ(r.rc, exit_code::ok) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  const auto ms = read_catalog(out1 / "catalog.jsonl");
  EXPECT_GE(ms.size(), 3000u);
  std::set<std::string> ids, families, tasks, paths;
  for (const auto& m : ms) {
    EXPECT_TRUE(ids.insert(m.id).second) << "repeated id " << m.id;
    families.insert(m.family);
    tasks.insert(m.task);
    paths.insert(m.path);
  }
  EXPECT_EQ(families.size(), 7u);
  EXPECT_GE(tasks.size(), 40u);
  EXPECT_TRUE(paths.count("kernels/tasks/relu.cu"));
  EXPECT_TRUE(tasks.count("relu"));
  // A variant belongs to its folder's task.
  for (const auto& m : ms)
    if (m.path.rfind("kernels/variants/qwen3_decode_linear_bf16/", 0) == 0) {
      EXPECT_EQ(m.task, "qwen3_decode_linear_bf16");
    }
  // Ordered by path, then offset, then rule; every mutant applies to its file.
  std::map<std::string, std::string> sources;
  for (std::size_t k = 0; k < ms.size(); ++k) {
    const auto& m = ms[k];
    if (k > 0) {
      const auto& p = ms[k - 1];
      EXPECT_TRUE(std::tie(p.path, p.offset, p.rule) < std::tie(m.path, m.offset, m.rule)) << k;
    }
    auto& src = sources[m.path];
    if (src.empty()) src = slurp(fs::path(KG_SOURCE_DIR) / m.path);
    EXPECT_NO_THROW((void)apply_mutant(src, m)) << m.id;
  }
  // The summary counts the same catalog and names every file read with its SHA-256.
  const auto summary = nlohmann::json::parse(slurp(out1 / "summary.json"));
  EXPECT_EQ(summary["mutants"], ms.size());
  int by_family = 0;
  for (const auto& f : mutant_families())
    by_family += summary["families"][f].get<int>();
  EXPECT_EQ(by_family, static_cast<int>(ms.size()));
  EXPECT_EQ(summary["tasks"].size(), tasks.size());
  EXPECT_EQ(summary["files"].size(), paths.size());
  for (const auto& f : summary["files"])
    EXPECT_EQ(f["sha256"].get<std::string>().size(), 64u);
  // The table by family and the final line.
  for (const auto& f : mutant_families())
    EXPECT_NE(r.out.find(f), std::string::npos) << f;
  const std::regex last(std::to_string(ms.size()) + " mutants in 7 families over " +
                        std::to_string(tasks.size()) + " tasks \\(" + std::to_string(paths.size()) +
                        " files\\)\n$");
  EXPECT_TRUE(std::regex_search(r.out, last)) << r.out;
  // A second run writes the same bytes; no temporary file is left behind.
  ASSERT_EQ(run({"mutants", "generate", "--out", out2.string()}).rc, exit_code::ok);
  EXPECT_EQ(slurp(out1 / "catalog.jsonl"), slurp(out2 / "catalog.jsonl"));
  EXPECT_EQ(slurp(out1 / "summary.json"), slurp(out2 / "summary.json"));
  std::set<std::string> left;
  for (const auto& e : fs::directory_iterator(out1))
    left.insert(e.path().filename().string());
  EXPECT_EQ(left, (std::set<std::string>{"catalog.jsonl", "summary.json"}));
}

TEST(mutants_cli, a_folder_of_candidates_names_tasks_by_file_or_folder) {
  const fs::path root = scratch() / "user", out = scratch() / "user-out";
  fs::create_directories(root / "cands" / "relu");
  const std::string kernel = slurp(fs::path(KG_SOURCE_DIR) / "kernels/tasks/relu.cu");
  std::ofstream(root / "cands" / "silu.cu") << kernel;
  std::ofstream(root / "cands" / "relu" / "mine.cu") << kernel;
  std::ofstream(root / "cands" / "notes.txt") << "a + b";
  const auto r = run({"mutants", "generate", "--root", root.string(), "--kernels", "cands", "--out",
                      out.string()});
  ASSERT_EQ(r.rc, exit_code::ok) << r.err;
  std::map<std::string, std::string> task_of;
  for (const auto& m : read_catalog(out / "catalog.jsonl"))
    task_of[m.path] = m.task;
  EXPECT_EQ(task_of, (std::map<std::string, std::string>{{"cands/relu/mine.cu", "relu"},
                                                         {"cands/silu.cu", "silu"}}));
  EXPECT_NE(r.out.find("over 2 tasks (2 files)"), std::string::npos) << r.out;
  // A glob with ** and a repeated --kernels: each file once.
  const auto g = run({"mutants", "generate", "--root", root.string(), "--kernels", "cands/**/*.cu",
                      "--kernels", "cands/silu.cu", "--out", out.string()});
  ASSERT_EQ(g.rc, exit_code::ok) << g.err;
  EXPECT_NE(g.out.find("over 2 tasks (2 files)"), std::string::npos) << g.out;
}

TEST(mutants_cli, bad_input_is_one_line_and_exit_2) {
  const fs::path root = scratch() / "bad";
  fs::create_directories(root);
  std::ofstream(root / "a_file") << "x";
  fs::create_symlink(root / "nowhere.cu", root / "dangling.cu");
  const std::string out = (scratch() / "bad-out").string();
  struct bad_case {
    std::vector<std::string> args;
    std::string says;
  };
  for (const auto& c : std::vector<bad_case>{
           {{"--kernels", "no/such/*.cu", "--out", out}, "no file matches"},
           {{"--kernels", "kernels/tasks/nothing_like_this.cu", "--out", out}, "no file matches"},
           {{"--root", root.string(), "--kernels", "dangling.cu", "--out", out}, "cannot read"},
           // (the CLI's stale result.json check names the folder first)
           {{"--out", (root / "a_file" / "sub").string()}, "a_file/sub"},
           {{"--root", (root / "missing").string(), "--out", out}, "is not a folder"},
           {{"--kernels", "kernels/tasks/relu.cu"}, "--out"},
           {{"--out", out, "--bogus"}, "--bogus"}}) {
    std::vector<std::string> args = {"mutants", "generate"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const auto r = run(args);
    EXPECT_EQ(r.rc, exit_code::bad_input) << c.says << ": " << r.err;
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_EQ(r.err.rfind("kernelgate: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
  }
  // The command itself names an output folder it cannot make.
  std::ostringstream out_text, err_text;
  mutants_options o;
  o.out = (root / "a_file" / "sub").string();
  EXPECT_EQ(run_mutants_generate_command(o, out_text, err_text), exit_code::bad_input);
  EXPECT_NE(err_text.str().find("cannot create output folder"), std::string::npos)
      << err_text.str();
  EXPECT_EQ(lines(err_text.str()), 1);
  const auto none = run({"mutants"});
  EXPECT_EQ(none.rc, exit_code::bad_input) << none.err;
  EXPECT_EQ(lines(none.err), 1) << none.err;
  EXPECT_FALSE(fs::exists(fs::path(out) / "catalog.jsonl"));
}

namespace {

std::map<std::string, std::string> statuses(const fs::path& file) {
  std::map<std::string, std::string> s;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    s[j["id"].get<std::string>()] = j["status"].get<std::string>();
  }
  return s;
}

} // namespace

TEST(mutants_cli, equivalence_marks_the_mutants_whose_cubin_is_the_originals) {
  // One kernel with a dead constant (3.0f: its mutants are equivalent), a live one (2.0f: they
  // differ) and host launch arithmetic (host_code); plus a planted mutant that cannot compile.
  const fs::path root = scratch() / "eq", cat = scratch() / "eq-catalog",
                 out = scratch() / "eq-out";
  fs::create_directories(root / "k");
  std::ofstream(root / "k" / "twice.cu")
      << "__global__ void twice(const float* x, float* y, int n) {\n"
         "  float unused = 3.0f;\n"
         "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
         "  if (i < n) y[i] = x[i] * 2.0f;\n"
         "}\n"
         "int blocks_for(int n) { return (n + 255) / 256; }\n";
  const auto g = run({"mutants", "generate", "--root", root.string(), "--kernels", "k/*.cu",
                      "--out", cat.string()});
  ASSERT_EQ(g.rc, exit_code::ok) << g.err;
  auto catalog = read_catalog(cat / "catalog.jsonl");
  mutant broken = catalog.front();
  for (const auto& m : catalog)
    if (m.original == "2.0f") broken = m;
  ASSERT_EQ(broken.original, "2.0f");
  broken.id = "ffffffffffffffff";
  broken.replacement = "2.0f +"; // y[i] = x[i] * 2.0f +;
  std::ofstream(cat / "catalog.jsonl", std::ios::app) << to_json(broken).dump() << "\n";
  catalog.push_back(broken);

  const auto r = run({"mutants", "equivalence", "--catalog", cat.string(), "--root", root.string(),
                      "--jobs", "2", "--out", out.string()});
  ASSERT_EQ(r.rc, exit_code::ok) << r.err;
  const auto s = statuses(out / "equivalence.jsonl");
  ASSERT_EQ(s.size(), catalog.size());
  int equivalent = 0, differs = 0, host = 0;
  for (const auto& m : catalog) {
    const auto& st = s.at(m.id);
    if (m.id == broken.id) {
      EXPECT_EQ(st, "compile_error");
    } else if (m.original == "3.0f") {
      EXPECT_EQ(st, "equivalent") << m.rule;
      ++equivalent;
    } else if (m.original == "2.0f") {
      EXPECT_EQ(st, "differs") << m.rule;
      ++differs;
    } else if (m.line == 6) {
      EXPECT_EQ(st, "host_code") << m.rule << " " << m.original;
      ++host;
    }
  }
  EXPECT_GT(equivalent, 0);
  EXPECT_GT(differs, 0);
  EXPECT_GT(host, 0);
  const auto summary = nlohmann::json::parse(std::ifstream(out / "summary.json"));
  EXPECT_EQ(summary["mutants"], catalog.size());
  EXPECT_EQ(summary["statuses"]["compile_error"], 1);
  EXPECT_FALSE(fs::exists(out / "work")); // the compiles' folders are removed
  EXPECT_NE(r.out.find("compiles on 2 threads"), std::string::npos) << r.out;

  // Bad input: no catalog, a source edited after generate, a bad regex.
  EXPECT_EQ(run({"mutants", "equivalence", "--catalog", (scratch() / "none").string(), "--out",
                 out.string()})
                .rc,
            exit_code::bad_input);
  EXPECT_EQ(run({"mutants", "equivalence", "--catalog", cat.string(), "--root", root.string(),
                 "--tasks", "(", "--out", out.string()})
                .rc,
            exit_code::bad_input);
  std::ofstream(root / "k" / "twice.cu") << "// edited\n";
  const auto edited = run({"mutants", "equivalence", "--catalog", cat.string(), "--root",
                           root.string(), "--out", out.string()});
  EXPECT_EQ(edited.rc, exit_code::bad_input);
  EXPECT_EQ(lines(edited.err), 1) << edited.err;
  EXPECT_NE(edited.err.find("does not match"), std::string::npos) << edited.err;
}
