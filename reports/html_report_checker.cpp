// `kernelgate audit checker`'s output folder (summary.json, kill_matrix.json, verdicts.jsonl and,
// under --protocol, witnesses.jsonl): the kill matrix as a heat map (mutant family x checker
// column), the scores, the correct kernels rejected, and every escape with its witness.
#include <map>

#include "reports/html_report_parts.h"

namespace kg::html {
namespace {

std::string interval(const json& v) {
  if (!v.is_array() || v.size() != 2 || !v[0].is_number()) return "";
  return " [" + sig(v[0].get<double>(), 3) + ", " + sig(v[1].get<double>(), 3) + "]";
}

// What showed the mutant wrong: the first configuration that disagreed with the oracle and how
// (--protocol's witness lines), else the status the --witnesses file gave it.
std::string witness_cell(const json* w) {
  // --cmd: the statuses came from the --witnesses file given to the audit, not kept here.
  if (!w)
    return "witnessed <span class=\"muted\">(per the --witnesses file the audit was given; no "
           "configuration recorded here)</span>";
  if (!w->contains("witness"))
    return text(w->value("status", json())) +
           " <span class=\"muted\">(from --witnesses: no configuration recorded)</span>";
  const json& cfg = (*w)["witness"];
  const json ev = w->value("evidence", json::object());
  std::string s = "<code>" + text(cfg.value("name", json())) + "</code>";
  if (ev.contains("crash") && ev["crash"].is_string() && !ev["crash"].get<std::string>().empty())
    return s + ": crashed (" + text(ev["crash"]) + ")";
  return s + ": " + text(ev.value("output", json())) + "[" + text(ev.value("index", json())) +
         "] got " + text(ev.value("got", json())) + ", oracle " + text(ev.value("want", json())) +
         " (abs error " + text(ev.value("abs_error", json())) + ")";
}

} // namespace

page_part audit_checker_part(const json& folder) {
  const json& s = folder["summary"];
  const json& km = folder["kill_matrix"];
  std::map<std::string, json> witnesses, details;
  for (const auto& w : folder.value("witnesses", json::array()))
    witnesses[w.value("id", std::string())] = w;
  for (const auto& v : folder.value("verdicts", json::array()))
    details[v.value("row", std::string()) + "\n" +
            v.value("checker", v.value("protocol", std::string("cmd")))] = v;
  // Family x checker, counted from the matrix's letters over witnessed mutants (only they are
  // scored: an unwitnessed mutant may be equivalent to the original).
  json cells = json::object();
  const json checkers = km.value("checkers", json::array());
  const json rows = km.value("rows", json::array());
  std::vector<std::vector<std::string>> escapes;
  for (const auto& c : checkers) {
    const auto col = c.get<std::string>();
    const auto letters = km["cells"].value(col, std::string());
    for (std::size_t i = 0; i < rows.size() && i < letters.size(); ++i) {
      const json& r = rows[i];
      if (r.value("control", false) || r.value("status", std::string()) != "witnessed") continue;
      json& cell = cells[r.value("family", std::string("?"))][col];
      for (const char* k : {"accepted", "rejected", "errors", "missing"})
        if (!cell.contains(k)) cell[k] = 0;
      const char l = letters[i];
      const char* key = l == 'K'   ? "rejected"
                        : l == 'S' ? "accepted"
                        : l == '.' ? "missing"
                                   : "errors";
      cell[key] = cell[key].get<int>() + 1;
      if (l == 'S') {
        const auto id = r.value("id", std::string());
        const auto w = witnesses.find(id);
        const auto d = details.find(id + "\n" + col);
        escapes.push_back({"<code>" + esc(id) + "</code>", text(r.value("family", json())),
                           text(r.value("task", json())), esc(col),
                           d == details.end() ? "-" : text(d->second.value("detail", json())),
                           witness_cell(w == witnesses.end() ? nullptr : &w->second)});
      }
    }
  }
  const json score = s.value("score", json::object());
  const json rejected = s.value("false_rejections", json::array());
  page_part p;
  p.verdict = rejected.empty() ? "every correct kernel accepted"
                               : std::to_string(rejected.size()) + " correct kernels rejected";
  p.verdict_class = rejected.empty() ? "pass" : "fail";
  const json checker = s.value("checker", json::object());
  p.summary = "<p>checker <code>" +
              text(checker.contains("cmd") ? checker["cmd"] : checker.value("protocols", json())) +
              "</code>: " + text(s.value("mutants", json())) + " mutants, " +
              text(score.value("intended", json())) + " witnessed and scored; killed " +
              text(score.value("killed", json())) + ", survived " +
              text(score.value("survived", json())) + "; mutation score " +
              text(score.value("mutation_score", json())) +
              interval(score.value("mutation_score_ci95", json())) + ", escape rate " +
              text(score.value("escape_rate", json())) +
              interval(score.value("escape_rate_ci95", json())) + " (Wilson 95%)</p>";
  std::vector<std::vector<std::string>> false_rows;
  for (const auto& r : rejected)
    false_rows.push_back({"<code>" + text(r.value("control", json())) + "</code>",
                          text(r.value("task", json())), text(r.value("verdict", json()))});
  p.body = section("Kill matrix",
                   "<div class=\"plots\">" +
                       heat_map("Kill matrix: mutant family x checker (witnessed mutants)", cells,
                                "checker") +
                       "</div>",
                   "kill-matrix") +
           section("Correct kernels rejected",
                   false_rows.empty() ? "<p>None: every control was accepted.</p>"
                                      : table({"control", "task", "verdict"}, false_rows)) +
           section("Escapes (witnessed mutants the checker accepted)",
                   escapes.empty() ? "<p>No witnessed mutant escaped.</p>"
                                   : table({"mutant", "family", "task", "checker", "checker said",
                                            "witness (first configuration that showed it wrong)"},
                                           escapes),
                   "escapes");
  return p;
}

} // namespace kg::html
