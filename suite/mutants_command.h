// `kernelgate mutants generate`: the mutant catalog (mutants/mutant_catalog.h) of CUDA kernels,
// written without compiling anything: DIR/catalog.jsonl (one mutant per line, ordered by path,
// offset, rule) and DIR/summary.json (counts by family, rule and task; the files read and their
// SHA-256), each written to a temporary name in DIR and renamed.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <regex>
#include <string>
#include <vector>

#include "mutants/mutant_catalog.h"

namespace kg {

// The options of `kernelgate mutants generate` (help texts in suite/cli.cpp).
struct mutants_options {
  std::vector<std::string> kernels; // globs or folders, relative to root; empty: the defaults
  std::string root;                 // empty: default_source_root()
  std::string out;
  bool no_progress = false; // one line per file even on a terminal
};

// $KERNELGATE_SOURCE_DIR when set and not empty, else the source tree kernelgate was built from.
std::filesystem::path default_source_root();
// kernels/tasks/*.cu and kernels/variants/**/*.cu.
std::vector<std::string> default_kernel_globs();

// A file a glob names, with the task it belongs to: the file's stem, or the first folder below
// the glob's fixed part (DIR/TASK/NAME.cu, kernels/variants/TASK/NAME.cu).
struct kernel_file {
  std::filesystem::path file;
  std::string task;
};
// The files of one glob (`*`, `?`, `[...]` within a name, `**` for any folders; a folder names
// every .cu below it), sorted. Relative globs are taken under root.
std::vector<kernel_file> expand_kernel_glob(const std::string& glob,
                                            const std::filesystem::path& root);

// Every mutant of a `mutants generate` folder's catalog.jsonl, in file order. Throws
// std::invalid_argument naming the file (unreadable) or the line (malformed).
std::vector<mutant> read_mutant_catalog(const std::filesystem::path& folder);
// A --tasks option's regex (empty: every task). Throws std::invalid_argument naming it.
std::regex task_regex(const std::string& text);

// Exit 0; 2 for an unmatched glob, an unreadable file or an unusable output folder (one line on
// err naming it).
int run_mutants_generate_command(const mutants_options& o, std::ostream& out, std::ostream& err);

} // namespace kg
