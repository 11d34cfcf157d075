// `kernelgate mutants equivalence --catalog DIR`: which mutants of a catalog (mutants generate)
// are equivalent by machine code (sandbox/sass_equivalence.h), before any is run. Each source is
// compiled once as it is and once per mutant whose site is device-only code, in parallel; a
// mutant is `equivalent` when its cubin digest is the original's, `differs` otherwise,
// `compile_error` when nvcc refuses it, `host_code` when its site is host code (not comparable).
// OUT/equivalence.jsonl (one line per mutant, catalog order) and OUT/summary.json (counts by
// family and status, the phases' wall seconds) are written to temporary names and renamed.
#pragma once

#include <ostream>
#include <string>

namespace kg {

struct mutants_equivalence_options {
  std::string catalog; // a `mutants generate` output folder (catalog.jsonl)
  std::string root;    // where the catalog's paths are; empty: default_source_root()
  std::string tasks;   // a regex: only mutants of matching tasks; empty: all
  std::string out;
  int jobs = 0;             // parallel compiles; 0: every core
  bool no_progress = false; // one line per compile even on a terminal
};

// Exit 0; 2 for a missing or malformed catalog, a source that does not match it, a bad regex or
// an unusable output folder (one line on err naming it).
int run_mutants_equivalence_command(const mutants_equivalence_options& o, std::ostream& out,
                                    std::ostream& err);

} // namespace kg
