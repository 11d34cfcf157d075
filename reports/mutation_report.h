// One checker's audit as a mutation-testing report (the format the public
// mutation-testing-elements viewer opens; kernelgate's statement of it:
// data/schema/mutation-report.schema.json). Each mutated file carries its original source and
// its mutants, each with the checker's outcome:
//   witnessed, killed            -> Killed
//   witnessed, survived          -> Survived (an escape)
//   witnessed, checker error     -> RuntimeError (statusReason: the checker failed, not the mutant)
//   witnessed, timeout           -> Timeout
//   witnessed, no verdict        -> NoCoverage (the checker never judged it: unknown, not failed)
//   compile error                -> CompileError
//   equivalent, unwitnessed      -> Ignored, statusReason "equivalent: ..." / "unwitnessed: ..."
//                                   (never counted as escapes)
//   not yet witnessed            -> Pending
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mutants/kill_matrix.h"
#include "mutants/mutant_catalog.h"

namespace kg {

struct mutation_report_options {
  int threshold_high = 80, threshold_low = 60; // the viewer's colour bands, % of mutants killed
  std::string project_root;                    // optional
};

// The report for `checker` over the catalog's mutants that are rows of `matrix` (others are left
// out), `sources` giving each mutated file's original text by catalog path. Throws
// std::invalid_argument when a mutant's file has no source or its original text is not at its
// offset (the catalog and the sources disagree).
nlohmann::json mutation_report(const kill_matrix& matrix, const std::string& checker,
                               const std::vector<mutant>& catalog,
                               const std::map<std::string, std::string>& sources,
                               const mutation_report_options& opt = {});

} // namespace kg
