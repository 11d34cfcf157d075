// An outside reward checker, audited through `kernelgate audit checker --cmd 'CMD'`: a lab's own
// checker (a Python script, a service client) judged on the same mutants and correct kernels as
// the built-in protocols.
//
// The interface (docs/cli.md): CMD is a shell command line in which {task}, {candidate} and
// {workdir} are replaced by the task's JSON file, the candidate's .cu file and an empty scratch
// folder for this call (each single-quoted for the shell; "{{" and "}}" stand for braces). It runs
// under /bin/sh in its own process group with stdin from /dev/null, its output in
// {workdir}/checker.log. Exit 0: the checker accepts the candidate; exit 1: it rejects it; any
// other exit, or a signal, is a checker error recorded as such (never a rejection); past the
// timeout the whole process group is killed and the call is a timeout.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>

#include "mutants/kill_matrix.h"

namespace kg {

// A malformed command template: one line, the CLI's bad input.
struct checker_command_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// The shell command for one call. Throws checker_command_error for an unknown placeholder, an
// unmatched brace, or a template without {candidate} (it could not be judging the candidate).
std::string expand_checker_command(const std::string& command_template,
                                   const std::filesystem::path& task,
                                   const std::filesystem::path& candidate,
                                   const std::filesystem::path& workdir);

struct checker_answer {
  kill_verdict verdict = kill_verdict::missing; // survived (accepted), killed, error or timeout
  std::string detail;                           // "exit 1", "killed by signal 11 ...", "timeout"
  double seconds = 0;
};

// One call: creates workdir, runs the command, maps its end to a verdict (above). Throws
// std::runtime_error only when the shell cannot be started.
checker_answer run_external_checker(const std::string& command_template,
                                    const std::filesystem::path& task,
                                    const std::filesystem::path& candidate,
                                    const std::filesystem::path& workdir, double timeout_seconds);

} // namespace kg
