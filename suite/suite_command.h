// `kernelgate suite list` and `kernelgate suite show NAME|FILE`: the regression suites of
// data/suites (docs/suites.md) and their workloads in run order.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>

#include "suite/suite_catalog.h"

namespace kg {

// The options of `kernelgate suite list` and `kernelgate suite show` (help texts in
// suite/cli.cpp).
struct suite_options {
  std::string suite;  // show: a suite name of the folder, or a suite file's path
  std::string filter; // show: keep the workloads whose id matches this ECMAScript regex
  bool markdown = false, json = false;
  std::filesystem::path suites_dir = default_suites_dir();
};

// Every suite file of the folder with its workload count and expected time. Exit 2 when the
// folder holds none or one does not load.
int run_suite_list_command(const suite_options& o, std::ostream& out, std::ostream& err);
// The suite's workloads in run order: a text table, docs/suites.md's markdown block
// (--markdown), or the resolved suite document (--json). Exit 2 for an unknown suite, a bad file
// or a filter that is not a regex or matches nothing.
int run_suite_show_command(const suite_options& o, std::ostream& out, std::ostream& err);

} // namespace kg
