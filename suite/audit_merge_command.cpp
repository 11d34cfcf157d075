#include "suite/audit_merge_command.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "base/printable.h"
#include "mutants/kill_matrix.h"
#include "oracles/protocol.h"
#include "reports/environment.h"
#include "reports/result_writer.h"
#include "suite/audit_scores.h"
#include "suite/exit_codes.h"

namespace kg {

namespace fs = std::filesystem;

namespace {

constexpr const char* protocols_schema = "kernelgate.audit.protocols/1";

int bad_input(std::ostream& err, const std::string& why) {
  err << "kernelgate: audit merge: " << printable(why, 600) << "\n";
  return exit_code::bad_input;
}

struct part {
  fs::path dir;
  nlohmann::json summary;
  kill_matrix km;
};

nlohmann::json read_json(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error("cannot read '" + file.string() + "'");
  try {
    return nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw std::runtime_error("'" + file.string() + "' is not JSON: " + e.what());
  }
}

part read_part(const fs::path& dir) {
  part p{dir, read_json(dir / "summary.json"), {}};
  if (!p.summary.is_object() || p.summary.value("schema", std::string()) != protocols_schema)
    throw std::runtime_error("'" + (dir / "summary.json").string() +
                             "' is not the summary of an `audit checker --protocol` run (schema " +
                             protocols_schema + ")");
  try {
    p.km = kill_matrix::from_json(read_json(dir / "kill_matrix.json"));
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error("'" + (dir / "kill_matrix.json").string() + "': " + e.what());
  }
  return p;
}

// A part's JSON lines (verdicts.jsonl, witnesses.jsonl) into `lines`, each row (key `key`) once:
// the first part's line wins (the matrices' merge has checked that the parts agree on it).
void gather_lines(const fs::path& file, const char* key, std::set<std::string>& seen,
                  std::string& lines) {
  std::ifstream in(file);
  for (std::string text; std::getline(in, text);) {
    const auto l = nlohmann::json::parse(text, nullptr, false);
    if (!l.is_object() || !l.contains(key) || !l[key].is_string()) continue; // a torn last line
    if (seen.insert(l[key].get<std::string>()).second) lines += text + "\n";
  }
}

double phase(const nlohmann::json& summary, const char* name) {
  const auto& p = summary.value("phases_seconds", nlohmann::json::object());
  return p.contains(name) && p[name].is_number() ? p[name].get<double>() : 0.0;
}

} // namespace

int run_audit_merge_command(const audit_merge_options& o, std::ostream& out, std::ostream& err) {
  if (o.dirs.empty()) return bad_input(err, "no folder to merge");
  if (o.out.empty()) return bad_input(err, "--out is empty");
  std::vector<part> parts;
  kill_matrix km;
  try {
    for (const auto& d : o.dirs) {
      parts.push_back(read_part(d));
      km = parts.size() == 1 ? parts.back().km : kill_matrix::merge(km, parts.back().km);
    }
  } catch (const std::exception& e) { // unreadable parts, and cells or rows the parts disagree on
    return bad_input(err, e.what());
  }
  std::vector<protocol> protocols;
  for (const auto& c : km.checkers()) {
    const auto p = find_protocol(c);
    if (!p)
      return bad_input(err, "column '" + c + "' is not a protocol `kernelgate protocols` lists");
    protocols.push_back(*p);
  }

  std::map<std::string, std::vector<std::string>> invalid; // protocol -> tasks
  const auto scores = protocol_scores(km, protocols, invalid);
  std::map<std::string, int> statuses;
  for (const auto& r : km.rows())
    if (!r.control) ++statuses[std::string(witness_status_name(r.status))];
  nlohmann::json listed = nlohmann::json::array();
  double compile = 0, judging = 0, total = 0;
  int interrupted = 0;
  for (const auto& p : parts) {
    const auto status = p.summary.value("status", std::string("complete"));
    interrupted += status != "complete";
    compile += phase(p.summary, "compile");
    judging += phase(p.summary, "witness_and_protocols");
    total += phase(p.summary, "total");
    listed.push_back({{"folder", fs::absolute(p.dir).string()},
                      {"status", status},
                      {"catalog", p.summary.value("catalog", nlohmann::json())},
                      {"tasks", p.summary.value("tasks", nlohmann::json())},
                      {"mutants", p.summary.value("mutants", nlohmann::json())},
                      {"controls", p.summary.value("controls", nlohmann::json())},
                      {"workers", p.summary.value("workers", nlohmann::json())},
                      {"phases_seconds", p.summary.value("phases_seconds", nlohmann::json())},
                      // (what the part could not run or judge: refused configurations, faults)
                      {"witness_plan", p.summary.value("witness_plan", nlohmann::json())},
                      {"not_judged", p.summary.value("not_judged", nlohmann::json())},
                      {"environment", p.summary.value("environment", nlohmann::json())}});
  }
  nlohmann::json summary = {
      {"schema", "kernelgate.audit.merged/1"},
      {"status", interrupted ? "incomplete" : "complete"},
      {"environment", collect_environment()},
      {"parts", listed},
      {"witness_statuses", statuses},
      // The parts' own times, summed: their wall time had they run one after another.
      {"phases_seconds_summed",
       {{"compile", compile}, {"witness_and_protocols", judging}, {"total", total}}},
      {"protocols", scores}};
  if (scores.contains("kernelbench")) summary["published_reference"] = published_reference();

  std::set<std::string> seen_verdicts, seen_witnesses;
  std::string verdicts, witnesses;
  for (const auto& p : parts) {
    gather_lines(p.dir / "verdicts.jsonl", "row", seen_verdicts, verdicts);
    gather_lines(p.dir / "witnesses.jsonl", "id", seen_witnesses, witnesses);
  }
  std::error_code ec;
  fs::create_directories(o.out, ec);
  try {
    write_file_atomically(fs::path(o.out) / "verdicts.jsonl", verdicts);
    write_file_atomically(fs::path(o.out) / "witnesses.jsonl", witnesses);
    write_file_atomically(fs::path(o.out) / "kill_matrix.json", km.to_json().dump() + "\n");
    write_file_atomically(fs::path(o.out) / "summary.json", summary.dump(1) + "\n");
  } catch (const std::exception& e) {
    return bad_input(err, "cannot write into '" + o.out + "': " + e.what());
  }

  print_escape_table(out, km, km.checkers());
  if (scores.contains("kernelbench")) print_published_reference(out);
  out << "witness: ";
  for (const auto& [s, n] : statuses)
    out << n << " " << s << "; ";
  out << parts.size() << " parts; their phases summed: compile " << static_cast<long>(compile + 0.5)
      << " s, witness + protocols " << static_cast<long>(judging + 0.5) << " s, total "
      << static_cast<long>(total + 0.5) << " s\n";
  if (interrupted)
    out << interrupted
        << " of the parts were interrupted: their verdicts count, the rest are missing\n";
  for (const auto& [p, ts] : invalid) {
    out << p << " rejected a correct kernel: invalid for";
    for (const auto& t : std::set<std::string>(ts.begin(), ts.end()))
      out << " " << t;
    out << "\n";
  }
  if (invalid.empty() && !interrupted) out << "every correct kernel accepted by every protocol\n";
  return invalid.empty() && !interrupted ? exit_code::ok : exit_code::failures;
}

} // namespace kg
