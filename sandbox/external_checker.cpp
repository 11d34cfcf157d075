#include "sandbox/external_checker.h"

#include "sandbox/process.h"

namespace kg {

namespace {

// 'text' for /bin/sh: inside single quotes nothing is special but the quote itself, written
// as '\'' (close, an escaped quote, reopen).
std::string shell_quoted(const std::string& text) {
  std::string out = "'";
  for (const char c : text)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

} // namespace

std::string expand_checker_command(const std::string& command_template,
                                   const std::filesystem::path& task,
                                   const std::filesystem::path& candidate,
                                   const std::filesystem::path& workdir) {
  std::string out;
  bool saw_candidate = false;
  for (std::size_t i = 0; i < command_template.size(); ++i) {
    const char c = command_template[i];
    if (c == '}') {
      if (i + 1 < command_template.size() && command_template[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      throw checker_command_error("--cmd: an unmatched '}' at character " + std::to_string(i + 1) +
                                  " (write }} for a brace)");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < command_template.size() && command_template[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const auto end = command_template.find('}', i);
    if (end == std::string::npos)
      throw checker_command_error("--cmd: an unmatched '{' at character " + std::to_string(i + 1) +
                                  " (write {{ for a brace)");
    const auto name = command_template.substr(i + 1, end - i - 1);
    if (name == "task")
      out += shell_quoted(task.string());
    else if (name == "candidate")
      out += shell_quoted(candidate.string()), saw_candidate = true;
    else if (name == "workdir")
      out += shell_quoted(workdir.string());
    else
      throw checker_command_error("--cmd: unknown placeholder {" + name +
                                  "} (known: {task}, {candidate}, {workdir})");
    i = end;
  }
  if (!saw_candidate)
    throw checker_command_error("--cmd: the command never names {candidate}, the kernel to judge");
  return out;
}

checker_answer run_external_checker(const std::string& command_template,
                                    const std::filesystem::path& task,
                                    const std::filesystem::path& candidate,
                                    const std::filesystem::path& workdir, double timeout_seconds) {
  const auto command = expand_checker_command(command_template, task, candidate, workdir);
  std::filesystem::create_directories(workdir);
  process_limits limits;
  limits.timeout_seconds = timeout_seconds;
  const auto r = run_process({"/bin/sh", "-c", command}, workdir / "checker.log", limits);
  checker_answer a;
  a.seconds = r.seconds;
  if (r.timed_out) {
    a.verdict = kill_verdict::timeout;
    a.detail = "no answer within " + std::to_string(timeout_seconds) + " s";
  } else if (r.exited && r.exit_code == 0) {
    a.verdict = kill_verdict::survived; // accepted
    a.detail = "exit 0 (accept)";
  } else if (r.exited && r.exit_code == 1) {
    a.verdict = kill_verdict::killed; // rejected
    a.detail = "exit 1 (reject)";
  } else {
    a.verdict = kill_verdict::error;
    a.detail = r.describe() + " (neither 0, accept, nor 1, reject)";
  }
  return a;
}

} // namespace kg
