#include "suite/slurm_command.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "base/printable.h"
#include "reports/result_writer.h"
#include "sandbox/process.h"
#include "suite/exit_codes.h"

namespace kg {

namespace fs = std::filesystem;

namespace {

std::string quoted(const std::string& s) { // one shell word, whatever it holds
  std::string q = "'";
  for (char c : s)
    q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The command line without its --out (returned in `out`); refuses what the array sets itself.
std::vector<std::string> without_out(const std::vector<std::string>& cmd, std::string& out) {
  std::vector<std::string> rest;
  for (std::size_t i = 0; i < cmd.size(); ++i) {
    const auto& w = cmd[i];
    for (const char* own : {"--shard", "--gpus", "--resume"})
      if (w == own || w.rfind(std::string(own) + "=", 0) == 0)
        throw std::invalid_argument(std::string(own) + " is set by the array job itself: drop it");
    if (w == "--out") {
      if (i + 1 >= cmd.size()) throw std::invalid_argument("--out needs a folder");
      out = cmd[++i];
    } else if (w.rfind("--out=", 0) == 0) {
      out = w.substr(6);
    } else {
      rest.push_back(w);
    }
  }
  if (out.empty())
    throw std::invalid_argument("the command needs --out DIR (on a file system every node "
                                "sees): the shards and the merged result go there");
  return rest;
}

std::string sbatch_options(const slurm_options& o) {
  std::string s;
  if (!o.partition.empty()) s += "#SBATCH --partition=" + o.partition + "\n";
  if (!o.account.empty()) s += "#SBATCH --account=" + o.account + "\n";
  if (!o.time.empty()) s += "#SBATCH --time=" + o.time + "\n";
  return s;
}

bool plain_word(const std::string& s) { // safe after "#SBATCH --x=": no spaces, quotes or newlines
  return std::regex_match(s, std::regex(R"([A-Za-z0-9_.:,@%+\-/]*)"));
}

// Runs a command line, its stdout and stderr together; the exit status in `rc` (-1: not run).
std::string capture(const std::string& line, int& rc) {
  std::string text;
  FILE* p = ::popen((line + " 2>&1").c_str(), "r");
  if (!p) {
    rc = -1;
    return "";
  }
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;)
    text.append(buf, n);
  const int status = ::pclose(p);
  rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return text;
}

std::string first_line(const std::string& s) {
  const auto nl = s.find('\n');
  return printable(nl == std::string::npos ? s : s.substr(0, nl), 300);
}

std::string kernelgate_path() {
  std::error_code ec;
  const auto self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "kernelgate" : self.string();
}

} // namespace

slurm_scripts make_slurm_scripts(const slurm_options& o, const std::string& kernelgate) {
  if (o.shards < 1 || o.shards > 4096) throw std::invalid_argument("--shards must be 1..4096");
  if (o.gpus_per_shard < 0 || o.gpus_per_shard > 64)
    throw std::invalid_argument("--gpus-per-shard must be 0..64");
  for (const auto* v : {&o.partition, &o.account, &o.time})
    if (!plain_word(*v))
      throw std::invalid_argument("'" + *v + "' is not a plain Slurm option value");
  if (o.command.empty()) throw std::invalid_argument("give the command after --");
  const auto& c = o.command;
  const bool run = c[0] == "run", eval = c[0] == "eval";
  const bool audit = c.size() > 1 && c[0] == "audit" && c[1] == "checker";
  if (!run && !audit && !eval)
    throw std::invalid_argument("'" + c[0] +
                                "' does not shard: run, eval and audit checker --cmd do");
  if (eval && std::none_of(c.begin(), c.end(), [](const std::string& w) {
        return w == "--seed" || w.rfind("--seed=", 0) == 0;
      }))
    throw std::invalid_argument("eval in shards needs --seed N: every shard must draw the same "
                                "inputs");
  if (audit)
    for (const auto& w : c)
      if (w == "--protocol" || w.rfind("--protocol=", 0) == 0)
        throw std::invalid_argument("audit checker --protocol runs on one GPU and does not "
                                    "shard: use --cmd");
  std::string out_word;
  const auto rest = without_out(c, out_word);
  slurm_scripts s;
  s.out = fs::absolute(out_word).lexically_normal();
  if (!plain_word(s.out.string()))
    throw std::invalid_argument("--out '" + s.out.string() +
                                "' must be a plain path (no spaces or quotes): it goes on "
                                "#SBATCH lines");
  const auto cwd = fs::current_path().string();
  if (!plain_word(cwd))
    throw std::invalid_argument("the current folder '" + cwd +
                                "' must be a plain path (no spaces or quotes): the shards run "
                                "there (#SBATCH --chdir)");
  const auto slurm_dir = s.out / "slurm";
  const std::string n = std::to_string(o.shards);
  std::string words = quoted(kernelgate);
  for (const auto& w : rest)
    words += " " + quoted(w);
  const std::string name = run ? "kg-run" : eval ? "kg-eval" : "kg-audit";
  std::ostringstream a;
  std::string shown; // the command on one comment line, whatever its words hold
  for (const auto& w : c)
    shown += " " + quoted(w);
  for (std::size_t k = 0; (k = shown.find_first_of("\r\n", k)) != std::string::npos;)
    shown.replace(k, 1, " ");
  a << "#!/bin/bash\n"
    << "# kernelgate slurm submit: " << n << " shards of: kernelgate" << shown
    << "\n# Each array task is one shard (SLURM_ARRAY_TASK_ID); a requeued task resumes its "
       "folder.\n"
    << "#SBATCH --job-name=" << name << "\n"
    << "#SBATCH --array=0-" << o.shards - 1 << "\n";
  if (o.gpus_per_shard > 0) a << "#SBATCH --gres=gpu:" << o.gpus_per_shard << "\n";
  a << "#SBATCH --requeue\n"
    << "#SBATCH --open-mode=append\n"
    << "#SBATCH --output=" << (slurm_dir / "shard-%a.log").string() << "\n"
    << "#SBATCH --chdir=" << cwd << "\n"
    << sbatch_options(o) << "set -u\n"
    << "i=${SLURM_ARRAY_TASK_ID:?not a Slurm array task}\n"
    << "d=" << quoted((s.out / "shards").string()) << "/$i\n"
    << "echo \"kernelgate shard $i/" << n << " on $(hostname): job ${SLURM_JOB_ID:-?}, restart "
    << "${SLURM_RESTART_COUNT:-0}, CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-}, $(date -u "
       "+%FT%TZ)\"\n"
    << "if [ -e \"$d/shard.json\" ]; then\n"
    << "  " << words << " --shard \"$i/" << n << "\" --resume \"$d\"\n"
    << "else\n"
    << "  " << words << " --shard \"$i/" << n << "\" --out \"$d\"\n"
    << "fi\n"
    << "rc=$?\n"
    << "# 1: the shard ran to the end with failures (a gate, a rejected control): it is done.\n"
    << "[ $rc -eq 1 ] && exit 0\n"
    << "exit $rc\n";
  s.shards = a.str();
  std::ostringstream m;
  m << "#!/bin/bash\n"
    << "# kernelgate slurm submit: merges the " << n << " shards (after the array, whatever its "
    << "outcome).\n"
    << "#SBATCH --job-name=" << name << "-merge\n"
    << "#SBATCH --output=" << (slurm_dir / "merge.log").string() << "\n"
    << "#SBATCH --chdir=" << cwd << "\n"
    << sbatch_options(o) << quoted(kernelgate) << " merge";
  for (int i = 0; i < o.shards; ++i)
    m << " " << quoted((s.out / "shards" / std::to_string(i)).string());
  m << " --logs " << quoted(slurm_dir.string()) << " --out " << quoted(s.out.string()) << "\n";
  s.merge = m.str();
  return s;
}

std::vector<slurm_task> parse_scontrol_jobs(const std::string& text) {
  std::vector<slurm_task> tasks;
  std::istringstream lines(text);
  static const std::regex field(R"((\w+)=(\S*))");
  for (std::string line; std::getline(lines, line);) {
    std::map<std::string, std::string> f;
    for (auto it = std::sregex_iterator(line.begin(), line.end(), field);
         it != std::sregex_iterator(); ++it)
      f.emplace((*it)[1].str(), (*it)[2].str());
    if (!f.count("JobId") || !f.count("JobState")) continue;
    slurm_task t;
    t.job_id = f["JobId"];
    t.array_task = f.count("ArrayTaskId") ? f["ArrayTaskId"] : "";
    t.state = f["JobState"];
    t.reason = f["Reason"];
    t.exit_code = f["ExitCode"];
    t.std_out = f["StdOut"];
    // "4-7", "1,3,5-6", "0-9%2" (a throttle): how many tasks the line stands for.
    if (!t.array_task.empty()) {
      const auto spec = t.array_task.substr(0, t.array_task.find('%'));
      t.count = 0;
      std::istringstream parts(spec);
      for (std::string p; std::getline(parts, p, ',');) {
        const auto dash = p.find('-');
        try {
          t.count += dash == std::string::npos
                         ? 1
                         : std::stoi(p.substr(dash + 1)) - std::stoi(p.substr(0, dash)) + 1;
        } catch (const std::exception&) {
          t.count += 1;
        }
      }
    }
    tasks.push_back(t);
  }
  return tasks;
}

std::string slurm_state_class(const std::string& state) {
  if (state == "COMPLETED") return "done";
  if (state == "RUNNING" || state == "COMPLETING" || state == "CONFIGURING" ||
      state == "SUSPENDED" || state == "STAGE_OUT" || state == "SIGNALING")
    return "running";
  if (state == "PENDING" || state == "REQUEUED" || state == "REQUEUE_HOLD" ||
      state == "REQUEUE_FED" || state == "RESIZING" || state == "SPECIAL_EXIT")
    return "pending";
  return "failed";
}

int run_slurm_submit(const slurm_options& o, std::ostream& out, std::ostream& err) {
  slurm_scripts s;
  try {
    s = make_slurm_scripts(o, kernelgate_path());
  } catch (const std::invalid_argument& e) {
    err << "kernelgate: slurm submit: " << printable(e.what(), 400) << "\n";
    return exit_code::bad_input;
  }
  if (o.dry_run) {
    out << "# " << (s.out / "slurm" / "shards.sbatch").string() << "\n"
        << s.shards << "\n# " << (s.out / "slurm" / "merge.sbatch").string() << "\n"
        << s.merge;
    return exit_code::ok;
  }
  const auto dir = s.out / "slurm";
  try {
    fs::create_directories(dir);
    fs::create_directories(s.out / "shards");
    write_file_atomically(dir / "shards.sbatch", s.shards);
    write_file_atomically(dir / "merge.sbatch", s.merge);
  } catch (const std::exception& e) {
    err << "kernelgate: slurm submit: cannot write the scripts under " << dir.string() << ": "
        << printable(e.what(), 300) << "\n";
    return exit_code::bad_input;
  }
  auto submit = [&](const std::string& extra, const fs::path& script, std::string& id) {
    int rc = 0;
    const auto text = capture("sbatch --parsable " + extra + quoted(script.string()), rc);
    if (rc == 0) {
      id = text.substr(0, text.find_first_of(";\n"));
      if (std::regex_match(id, std::regex("[0-9]+"))) return true;
    }
    err << "kernelgate: slurm submit: sbatch " << script.filename().string() << " failed"
        << (rc == 127 ? " (sbatch not found: is Slurm installed?)" : "") << ": " << first_line(text)
        << "\n";
    return false;
  };
  std::string array_id, merge_id;
  if (!submit("", dir / "shards.sbatch", array_id)) return exit_code::unavailable;
  if (!submit("--dependency=afterany:" + array_id + " ", dir / "merge.sbatch", merge_id)) {
    int rc = 0;
    (void)capture("scancel " + array_id, rc); // no array without its merge
    return exit_code::unavailable;
  }
  nlohmann::json jobs = {{"array_job", array_id}, {"merge_job", merge_id},
                         {"shards", o.shards},    {"command", o.command},
                         {"out", s.out.string()}, {"submitted", utc_timestamp()}};
  try {
    write_file_atomically(dir / "jobs.json", jobs.dump(1) + "\n");
  } catch (const std::exception&) {
  }
  out << "submitted array job " << array_id << " (" << o.shards << " shards) and merge job "
      << merge_id << " (afterany:" << array_id << ")\n"
      << "shard logs: " << (dir / "shard-I.log").string() << "\n"
      << "merged result: " << s.out.string() << " (when job " << merge_id << " ends)\n"
      << "kernelgate slurm status " << array_id << "\n";
  return exit_code::ok;
}

int run_slurm_status(const slurm_options& o, std::ostream& out, std::ostream& err) {
  if (!std::regex_match(o.job, std::regex("[0-9]+(_[0-9]+)?"))) {
    err << "kernelgate: slurm status: '" << printable(o.job) << "' is not a job id\n";
    return exit_code::bad_input;
  }
  int rc = 0;
  const auto text = capture("scontrol -o show job " + o.job, rc);
  if (rc == 127 || rc == -1) {
    err << "kernelgate: slurm status: scontrol cannot be run: " << first_line(text) << "\n";
    return exit_code::unavailable;
  }
  const auto tasks = parse_scontrol_jobs(text);
  if (rc != 0 || tasks.empty()) {
    err << "kernelgate: slurm status: Slurm does not know job " << o.job
        << " (ended more than MinJobAge ago?): " << first_line(text) << "\n";
    return exit_code::bad_input;
  }
  std::map<std::string, int> count;
  for (const auto& t : tasks)
    count[slurm_state_class(t.state)] += t.count;
  out << "job " << o.job << ": " << count["done"] << " done, " << count["running"] << " running, "
      << count["pending"] << " pending, " << count["failed"] << " failed\n";
  for (const auto& t : tasks) {
    if (slurm_state_class(t.state) != "failed") continue;
    out << "task " << (t.array_task.empty() ? t.job_id : t.array_task) << " " << t.state
        << " (exit " << t.exit_code << ", " << t.reason << "), log " << t.std_out << ":\n";
    const auto tail = file_tail(t.std_out, 1200);
    std::istringstream lines(tail);
    for (std::string l; std::getline(lines, l);)
      out << "  | " << printable(l, 300) << "\n";
  }
  return count["failed"] ? exit_code::failures : exit_code::ok;
}

} // namespace kg
