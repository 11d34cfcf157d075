#include "suite/audit_scores.h"

#include <cstdio>

#include "mutants/mutant_catalog.h"

namespace kg {

nlohmann::json protocol_scores(const kill_matrix& km, const std::vector<protocol>& ps,
                               std::map<std::string, std::vector<std::string>>& invalid) {
  nlohmann::json scores = nlohmann::json::object();
  for (const auto& p : ps) {
    nlohmann::json fam = nlohmann::json::object(), rejected = nlohmann::json::array(),
                   escapes = nlohmann::json::array();
    for (const auto& [f, s] : km.score_by_family(p.name))
      fam[f] = s.to_json();
    for (const auto* r : km.false_rejections(p.name)) {
      rejected.push_back({{"control", r->id}, {"task", r->task}});
      invalid[p.name].push_back(r->task);
    }
    for (const auto* r : km.escapes(p.name))
      escapes.push_back({{"id", r->id}, {"family", r->family}, {"task", r->task}});
    scores[p.name] = {{"protocol", p.to_json()},   {"score", km.score(p.name).to_json()},
                      {"families", fam},           {"false_rejections", rejected},
                      {"valid", rejected.empty()}, {"escapes", escapes}};
  }
  return scores;
}

void print_escape_table(std::ostream& out, const kill_matrix& km,
                        const std::vector<std::string>& columns) {
  if (columns.empty()) return;
  std::vector<std::string> families = mutant_families();
  families.push_back("");
  char cell[64];
  std::snprintf(cell, sizeof cell, "%-14s %6s", "family", "witn.");
  out << cell;
  for (const auto& c : columns) {
    std::snprintf(cell, sizeof cell, " | %-21s", c.c_str());
    out << cell;
  }
  out << "\n";
  for (const auto& f : families) {
    const auto first = km.score(columns.front(), f);
    if (first.intended == 0 && !f.empty()) continue;
    std::snprintf(cell, sizeof cell, "%-14s %6d", f.empty() ? "all" : f.c_str(), first.intended);
    out << cell;
    for (const auto& c : columns) {
      const auto s = km.score(c, f);
      const auto ci = s.escape_ci95();
      if (s.aligned() == 0)
        std::snprintf(cell, sizeof cell, " | %-21s", "-");
      else
        std::snprintf(cell, sizeof cell, " | %5.1f%% [%4.1f, %4.1f]", 100 * s.escape_rate(),
                      100 * ci.lo, 100 * ci.hi);
      out << cell;
    }
    out << "\n";
  }
  out << "(escape rate: witnessed mutants the protocol accepted, of those it judged; 95% Wilson)\n";
}

nlohmann::json published_reference() {
  return {{"source", "KernelBench-M, \"Measuring the Checker\": KernelBench's official check over "
                     "7,384 witnessed faults of 188 problems"},
          {"escape_rate", {{"all", 0.169}, {"arithmetic", 0.087}, {"precision", 0.786}}}};
}

void print_published_reference(std::ostream& out) {
  out << "published for comparison (KernelBench-M, \"Measuring the Checker\": KernelBench's "
         "check over 7,384 witnessed faults): all 16.9%, arithmetic 8.7%, precision 78.6%\n";
}

} // namespace kg
