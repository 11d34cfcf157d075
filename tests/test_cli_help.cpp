// The command line's help against its declarations and the docs: every command answers --help
// with every option it accepts, docs/cli.md carries each command's generated reference block
// verbatim and names no option the command lacks, the README lists every command, and the
// shell conventions (--opt=value, --) hold.
#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "cli_run.h"
#include "suite/cli.h"
#include "suite/exit_codes.h"

using namespace kg;

namespace {

using kg::test::run;
using kg::test::run_result;

std::vector<std::string> words(const std::string& path) {
  std::istringstream s(path);
  std::vector<std::string> w;
  for (std::string x; s >> x;)
    w.push_back(x);
  return w;
}

std::string slurp(const std::string& f) {
  std::ifstream in(f);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The text of docs/cli.md's section "## `kernelgate PATH`", up to the next "## ".
std::string doc_section(const std::string& doc, const std::string& path) {
  const std::string head = "## `kernelgate " + path + "`\n";
  const auto at = doc.find(head);
  if (at == std::string::npos) return "";
  const auto end = doc.find("\n## ", at + head.size());
  return doc.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

int lines(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

} // namespace

TEST(cli_help, every_command_is_described_with_its_options) {
  const auto all = describe_commands();
  std::set<std::string> paths;
  for (const auto& h : all)
    paths.insert(h.path);
  for (const char* p : {"env", "audit", "time", "eval", "fastp", "workload", "workload list",
                        "workload run", "protocols", "validate"})
    EXPECT_TRUE(paths.count(p)) << p;
  for (const auto& h : all)
    if (h.path == "eval") {
      for (const char* o :
           {"--tasks", "--candidates", "--protocol", "--trials", "--seed", "--timeout", "--jobs",
            "--workers", "--cache", "--time", "--time-budget", "--baselines", "--scratch", "--out",
            "--kernelbench", "--torch-time"})
        EXPECT_TRUE(std::any_of(h.options.begin(), h.options.end(), [&](const option_help& x) {
          return x.name == o;
        })) << o;
    }
}

TEST(cli_help, every_command_answers_help_with_every_option_it_accepts) {
  for (const auto& h : describe_commands()) {
    auto args = words(h.path);
    args.push_back("--help");
    const auto r = run(args);
    EXPECT_EQ(r.rc, exit_code::ok) << h.path << ": " << r.err;
    EXPECT_TRUE(r.err.empty()) << h.path << ": " << r.err;
    EXPECT_NE(r.out.find(h.summary), std::string::npos) << h.path;
    for (const auto& o : h.options) {
      EXPECT_NE(r.out.find(o.name), std::string::npos)
          << h.path << " --help lacks " << o.name << "\n"
          << r.out;
      if (!o.value.empty()) {
        EXPECT_NE(r.out.find(o.value), std::string::npos) << h.path << " " << o.name;
      }
    }
    // `kernelgate help PATH` prints the same text.
    auto help_args = words(h.path);
    help_args.insert(help_args.begin(), "help");
    EXPECT_EQ(run(help_args).out, r.out) << h.path;
  }
  const auto top = run({"--help"});
  EXPECT_EQ(top.rc, exit_code::ok);
  for (const auto& h : describe_commands())
    if (h.path.find(' ') == std::string::npos) {
      EXPECT_NE(top.out.find(h.path), std::string::npos) << h.path;
    }
  EXPECT_EQ(run({"help"}).out, top.out);
}

TEST(cli_help, docs_carry_each_commands_generated_reference_and_no_other_option) {
  const std::string doc = slurp(std::string(KG_SOURCE_DIR) + "/docs/cli.md");
  ASSERT_FALSE(doc.empty());
  const std::regex option("--[a-z][a-z0-9-]*");
  for (const auto& h : describe_commands()) {
    const std::string section = doc_section(doc, h.path);
    // (the block markers name `help --markdown`, not an option of the command)
    const std::string prose = std::regex_replace(section, std::regex("<!--[^>]*-->"), "");
    ASSERT_FALSE(section.empty()) << "docs/cli.md has no section ## `kernelgate " << h.path << "`";
    const std::string block = cli_reference_markdown(h);
    EXPECT_NE(section.find(block), std::string::npos)
        << "docs/cli.md's reference of '" << h.path
        << "' differs from the declarations (python3 scripts/cli_docs.py KERNELGATE rewrites "
           "it); `kernelgate help --markdown` prints:\n"
        << block;
    std::set<std::string> known = {"--help", "--help-all"};
    for (const auto& o : h.options)
      known.insert(o.name);
    // Options of the commands under this one (workload: list, run) count too.
    for (const auto& sub : describe_commands())
      if (sub.path.rfind(h.path + " ", 0) == 0)
        for (const auto& o : sub.options)
          known.insert(o.name);
    for (auto it = std::sregex_iterator(prose.begin(), prose.end(), option);
         it != std::sregex_iterator(); ++it)
      EXPECT_TRUE(known.count(it->str())) << "docs/cli.md's section on '" << h.path << "' names "
                                          << it->str() << ", which the command does not accept";
  }
}

TEST(cli_help, the_readme_lists_every_command_with_an_example) {
  const std::string readme = slurp(std::string(KG_SOURCE_DIR) + "/README.md");
  for (const auto& h : describe_commands())
    if (h.path.find(' ') == std::string::npos || h.path.rfind("workload ", 0) == 0) {
      EXPECT_NE(readme.find("kernelgate " + h.path), std::string::npos)
          << "README.md lacks an example of kernelgate " << h.path;
    }
}

TEST(cli_help, unknown_options_and_bad_values_are_one_line_and_exit_2) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"eval", "--tasks", "x", "--candidates", "y", "--bogus"},
           {"eval", "--tasks", "x", "--candidates", "y", "--trials", "0"},
           {"eval", "--tasks", "x", "--candidates", "y", "--timeout", "nan"},
           {"eval", "--tasks", "x", "--candidates", "y", "--seed", "-1"},
           {"eval", "--tasks", "x", "--candidates", "y", "--time", "maybe"},
           {"eval", "--candidates", "y"},
           {"time", "--impl", "layernorm", "--min-effect", "1"},
           {"fastp", "r.json", "--p", "1,,2"},
           {"fastp", "r.json", "--level", "0"},
           {"workload", "run", "lora-train-small", "--steps", "1"},
           {"workload"},
           {"env", "extra"},
           {"nonsense"}}) {
    const auto r = run(args);
    EXPECT_EQ(r.rc, exit_code::bad_input) << args[0] << " " << args.back() << ": " << r.err;
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_EQ(r.err.rfind("kernelgate: ", 0), 0u) << r.err;
  }
  // The rule is named with the value.
  const auto t = run({"eval", "--tasks", "x", "--candidates", "y", "--trials", "0"});
  EXPECT_NE(t.err.find("--trials"), std::string::npos) << t.err;
  EXPECT_NE(t.err.find("'0'"), std::string::npos) << t.err;
}

TEST(cli_help, option_equals_value_and_double_dash_work) {
  // --trials=0 is read as --trials 0 (and refused for its value, not as an unknown option).
  const auto eq = run({"eval", "--tasks=x", "--candidates=y", "--trials=0"});
  EXPECT_EQ(eq.rc, exit_code::bad_input);
  EXPECT_NE(eq.err.find("invalid --trials '0' (a whole number >= 1)"), std::string::npos) << eq.err;
  // After --, a word that looks like an option is the file to validate.
  const auto dd = run({"validate", "--", "--no-such-file.json"});
  EXPECT_EQ(dd.rc, exit_code::bad_input);
  EXPECT_NE(dd.err.find("--no-such-file.json"), std::string::npos) << dd.err;
  EXPECT_EQ(dd.err.find("not expected"), std::string::npos) << dd.err;
}
