// What both forms of `kernelgate audit checker` read before anything runs: the mutant catalog
// (filtered by --tasks), the witness statuses (--witnesses), the mutated files' sources and each
// task's file. Every problem is one sentence, so the commands fail with one line before any call.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "mutants/kill_matrix.h"
#include "mutants/mutant_catalog.h"
#include "suite/audit_checker_command.h"

namespace kg {

struct audit_inputs {
  std::filesystem::path root, tasks_dir;
  std::vector<mutant> mutants;                  // of the tasks --tasks selects, in catalog order
  std::map<std::string, witness_status> status; // by mutant id, from --witnesses (may be empty)
  std::map<std::string, std::string> sources;   // catalog path -> the original file's text
  std::map<std::string, std::string> task_of_path;
  std::map<std::string, std::filesystem::path> task_file; // task -> its JSON file
};

// Fills `in`; returns "" or what is wrong (an unreadable or malformed catalog or witness file, a
// witness id the catalog lacks, an unreadable source, a task without its file). An empty
// o.witnesses reads no statuses.
std::string read_audit_inputs(const audit_checker_options& o, audit_inputs& in);

} // namespace kg
