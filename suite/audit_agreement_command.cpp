#include "suite/audit_agreement_command.h"

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "base/printable.h"
#include "mutants/checker_agreement.h"
#include "mutants/kill_matrix.h"
#include "reports/result_writer.h"
#include "suite/exit_codes.h"

namespace kg {

namespace fs = std::filesystem;

namespace {

int bad_input(std::ostream& err, const std::string& why) {
  err << "kernelgate: audit agreement: " << printable(why, 600) << "\n";
  return exit_code::bad_input;
}

struct audited {
  fs::path dir, matrix_file;
  kill_matrix km;
  std::map<std::string, nlohmann::json> lines; // verdicts.jsonl by row (when the folder has one)
};

// The matrix of a folder or file; "" or what is wrong.
std::string load(const std::string& given, audited& a) {
  const fs::path p(given);
  std::error_code ec;
  a.matrix_file = fs::is_directory(p, ec) ? p / "kill_matrix.json" : p;
  a.dir = a.matrix_file.parent_path();
  std::ifstream in(a.matrix_file);
  if (!in) return "cannot read '" + a.matrix_file.string() + "'";
  try {
    a.km = kill_matrix::from_json(nlohmann::json::parse(in));
  } catch (const std::exception& e) {
    return "'" + a.matrix_file.string() + "' is not a kill matrix: " + e.what();
  }
  // The reasons, where the run kept them (a torn or foreign line is skipped: reasons only).
  std::ifstream lines(a.dir / "verdicts.jsonl");
  for (std::string text; std::getline(lines, text);) {
    const auto l = nlohmann::json::parse(text, nullptr, false);
    if (l.is_object() && l.contains("row") && l["row"].is_string())
      a.lines[l["row"].get<std::string>()] = l;
  }
  return "";
}

// The column named, or the matrix's only one; "" or what is wrong.
std::string column_of(const audited& a, const std::string& named, std::string& col) {
  const auto& cs = a.km.checkers();
  if (!named.empty()) {
    for (const auto& c : cs)
      if (c == named) {
        col = c;
        return "";
      }
  } else if (cs.size() == 1) {
    col = cs.front();
    return "";
  }
  std::string all;
  for (const auto& c : cs)
    all += (all.empty() ? "" : ", ") + c;
  return (named.empty() ? "'" + a.matrix_file.string() + "' has several checkers (" + all +
                              "): name one with --checkers"
                        : "'" + a.matrix_file.string() + "' has no checker '" + named +
                              "' (it has: " + all + ")");
}

// Why a side gave its verdict on a row: a protocol audit's per-check reason, an outside checker's
// detail.
std::string reason_of(const audited& a, const std::string& row, const std::string& col) {
  const auto it = a.lines.find(row);
  if (it == a.lines.end()) return "";
  const auto& l = it->second;
  if (l.contains("checks") && l["checks"].contains(col) && l["checks"][col].is_object() &&
      l["checks"][col].contains("reason") && l["checks"][col]["reason"].is_string())
    return l["checks"][col]["reason"].get<std::string>();
  if (l.contains("detail") && l["detail"].is_string()) return l["detail"].get<std::string>();
  return "";
}

std::string percent(double x) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(2) << 100.0 * x << "%";
  return s.str();
}

} // namespace

int run_audit_agreement_command(const audit_agreement_options& o, std::ostream& out,
                                std::ostream& err) {
  audited a, b;
  if (auto why = load(o.first, a); !why.empty()) return bad_input(err, why);
  if (auto why = load(o.second, b); !why.empty()) return bad_input(err, why);
  std::string name_a, name_b;
  if (const auto comma = o.checkers.find(','); comma != std::string::npos) {
    name_a = o.checkers.substr(0, comma);
    name_b = o.checkers.substr(comma + 1);
  } else {
    name_a = name_b = o.checkers;
  }
  std::string ca, cb;
  if (auto why = column_of(a, name_a, ca); !why.empty()) return bad_input(err, why);
  if (auto why = column_of(b, name_b, cb); !why.empty()) return bad_input(err, why);
  checker_agreement r;
  try {
    r = compare_checkers(a.km, ca, b.km, cb);
  } catch (const std::exception& e) {
    return bad_input(err, e.what());
  }
  auto j = r.to_json();
  j["kind"] = "checker_agreement";
  j["first"] = {{"matrix", fs::absolute(a.matrix_file).string()}, {"checker", ca}};
  j["second"] = {{"matrix", fs::absolute(b.matrix_file).string()}, {"checker", cb}};
  for (std::size_t k = 0; k < r.differences.size(); ++k) {
    const auto& id = r.differences[k].row.id;
    j["differences"][k]["first_reason"] = reason_of(a, id, ca);
    j["differences"][k]["second_reason"] = reason_of(b, id, cb);
  }
  if (!o.json.empty()) try {
      write_file_atomically(o.json, j.dump(2) + "\n");
    } catch (const std::exception& e) {
      return bad_input(err, "cannot write '" + o.json + "': " + e.what());
    }

  const auto ci = r.rate_ci95();
  out << "agreement: " << ca << " (" << a.matrix_file.string() << ") vs " << cb << " ("
      << b.matrix_file.string() << ")\n";
  out << "compared (a verdict on both sides): " << r.compared << " (" << r.compared_witnessed
      << " witnessed mutants, " << r.compared_controls << " controls)\n";
  out << "same verdict: " << r.same << " of " << r.compared << ", " << percent(r.rate()) << " ["
      << percent(ci.lo) << ", " << percent(ci.hi) << "] (95% Wilson)\n";
  out << "different: " << r.differences.size() << " (" << r.killed_by_a_only << " killed only by "
      << ca << ", " << r.killed_by_b_only << " killed only by " << cb << ")\n";
  out << "left out: " << r.only_in_a << " only in the first, " << r.only_in_b
      << " only in the second, " << r.no_verdict_a << " without a verdict in the first, "
      << r.no_verdict_b << " without a verdict in the second (error, timeout or not run)\n";
  for (std::size_t k = 0; k < r.differences.size(); ++k) {
    const auto& d = r.differences[k];
    out << "  " << d.row.id << "  " << d.row.task << "  "
        << (d.row.control ? std::string("control") : d.row.family) << "  " << ca << "="
        << kill_verdict_name(d.a) << ", " << cb << "=" << kill_verdict_name(d.b) << "\n";
    for (const auto* side : {"first_reason", "second_reason"})
      if (const auto w = j["differences"][k][side].get<std::string>(); !w.empty())
        out << "      " << (side[0] == 'f' ? ca : cb) << ": " << printable(w, 300) << "\n";
  }
  if (o.min_agreement > 0 && (r.compared == 0 || r.rate() < o.min_agreement)) {
    out << "below the asked agreement of " << percent(o.min_agreement) << "\n";
    return exit_code::failures;
  }
  return exit_code::ok;
}

} // namespace kg
