// Checker audits: feed a checker deliberately wrong implementations and correct controls, and
// report what it lets through.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kg {

struct audit_request {
  std::string name;              // "layernorm-affine"
  std::string backend = "cpu";   // cpu | cuda
  std::string protocol = "sol";  // the checker applied to the 504-observation grid
  std::filesystem::path out;     // output folder
  std::vector<std::string> argv; // recorded in the result
  bool no_progress = false;      // plain lines even on a terminal
};

std::span<const std::string_view> audit_names();
std::span<const std::string_view> audit_backends();

// Runs the audit, prints its tables to `out` and one-line errors to `err`, writes records.jsonl
// and result.json under request.out. Returns an exit code (suite/exit_codes.h).
int run_audit(const audit_request& request, std::ostream& out, std::ostream& err);

} // namespace kg
