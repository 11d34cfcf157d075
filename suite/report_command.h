// `kernelgate report RESULT... [--baseline RESULT] --html OUT.html`: the HTML page of
// reports/html_report.h, written atomically.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace kg {

struct report_options {
  std::vector<std::string> results; // result.json files or run folders
  std::optional<std::string> baseline;
  std::optional<std::string> history; // a run history database: trend lines
  std::string html;                   // the page written
};

// Exit 0 written, 2 bad input (a result missing, malformed or of an unknown kind; a baseline that
// is not a suite run; --html not writable).
int run_report_command(const report_options& o, std::ostream& out, std::ostream& err);

} // namespace kg
