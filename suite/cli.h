// The kernelgate command line, callable in-process (tests drive it with argument vectors). Every
// command and option is declared once, with CLI11, in cli.cpp; --help, the errors for unknown
// options and bad values, and docs/cli.md's reference blocks all come from those declarations.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace kg {

int kernelgate_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

struct option_help {
  std::string name;          // "--trials", or a positional's placeholder ("FILE")
  std::string value;         // the value's placeholder ("N"); empty for a flag
  std::string default_value; // as --help shows it
  std::string description;
  bool required = false;
  bool positional = false;
};

struct command_help {
  std::string path;     // "eval", "workload run"
  std::string summary;  // one line
  std::string synopsis; // "kernelgate eval --tasks GLOB --candidates DIR [--protocol NAME] ..."
  std::string help;     // what `kernelgate <path> --help` prints
  std::vector<option_help> options;
};

// Every user command (not the internal `worker`), in declaration order.
std::vector<command_help> describe_commands();

// docs/cli.md's reference block of one command (synopsis, summary, options table), and of all,
// each between "<!-- kernelgate help --markdown: PATH -->" and "<!-- end -->" lines, as
// `kernelgate help --markdown` prints them.
std::string cli_reference_markdown(const command_help& h);
std::string cli_reference_markdown();

} // namespace kg
