// An audit (`kernelgate audit layernorm-affine`): the kill matrix as heat maps (altered formula x
// regime under the audit's checker, altered formula x protocol preset), the controls, and the
// escapes grouped with a witness: the same formula on the same inputs, rejected where the
// parameters were varied.
#include <algorithm>
#include <cstdio>
#include <map>

#include "reports/html_report_parts.h"
#include "reports/svg_plot.h"

namespace kg::html {
namespace {

bool is_control(const std::string& row) {
  return row.rfind("control", 0) == 0;
}

// Red (nothing killed) through amber to green (all killed).
std::string kill_colour(double f) {
  const int r = f < 0.5 ? 220 : static_cast<int>(220 - (f - 0.5) * 2 * 170);
  const int g = f < 0.5 ? static_cast<int>(60 + f * 2 * 130) : 190;
  char buf[40];
  std::snprintf(buf, sizeof buf, "rgb(%d,%d,80)", r, g);
  return buf;
}

} // namespace

// cells: row -> column -> {accepted, rejected, errors, missing, planned}.
std::string heat_map(const std::string& title, const json& cells, const std::string& column_title) {
  std::vector<std::string> rows, cols;
  for (const auto& [row, by_col] : cells.items()) {
    if (is_control(row)) continue;
    rows.push_back(row);
    for (const auto& [col, v] : by_col.items())
      if (std::find(cols.begin(), cols.end(), col) == cols.end()) cols.push_back(col);
  }
  // JSON objects come back sorted by key; read left to right as the docs list them: the regimes
  // from the identity to both parameters varied, the presets from the most lenient peer.
  static const std::vector<std::string> preferred = {
      "identity",       "weight_only", "bias_only", "both",       "kernelbench",
      "kernelbench-v0", "kbv",         "sol",       "flashinfer", "strict"};
  auto rank = [&](const std::string& col) {
    const auto it = std::find(preferred.begin(), preferred.end(), col);
    return it == preferred.end() ? preferred.size()
                                 : static_cast<std::size_t>(it - preferred.begin());
  };
  std::stable_sort(cols.begin(), cols.end(),
                   [&](const std::string& a, const std::string& b) { return rank(a) < rank(b); });
  const double label_w = 210, cell_w = 104, cell_h = 30, top = 52;
  // At least wide enough for the title and the note below the cells.
  svg::canvas c(std::max(560.0, label_w + cell_w * static_cast<double>(cols.size()) + 16),
                top + cell_h * static_cast<double>(rows.size()) + 34, title);
  c.text(8, 16, title, "plot-title");
  c.text(label_w + cell_w * static_cast<double>(cols.size()) / 2, 34, column_title, "axis-title",
         "middle");
  for (std::size_t j = 0; j < cols.size(); ++j)
    c.text(label_w + cell_w * (static_cast<double>(j) + 0.5), top - 4, cols[j], "label", "middle");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const double y = top + cell_h * static_cast<double>(i);
    c.text(label_w - 8, y + cell_h / 2 + 4, rows[i], "label", "end");
    for (std::size_t j = 0; j < cols.size(); ++j) {
      const json v = cells[rows[i]].value(cols[j], json::object());
      const int rejected = v.value("rejected", 0), accepted = v.value("accepted", 0);
      const int decided = rejected + accepted;
      const double x = label_w + cell_w * static_cast<double>(j);
      const std::string tip = rows[i] + " under " + cols[j] + ": killed " +
                              std::to_string(rejected) + " of " + std::to_string(decided) +
                              " decided; errors " + std::to_string(v.value("errors", 0)) +
                              ", missing " + std::to_string(v.value("missing", 0));
      if (decided == 0) {
        c.rect(x + 1, y + 1, cell_w - 2, cell_h - 2, "grid", tip);
        c.text(x + cell_w / 2, y + cell_h / 2 + 4, "n/a", "cell-label", "middle");
        continue;
      }
      const double f = static_cast<double>(rejected) / decided;
      c.rect(x + 1, y + 1, cell_w - 2, cell_h - 2, "cell", tip, kill_colour(f));
      c.text(x + cell_w / 2, y + cell_h / 2 + 4,
             sig(f * 100, 3) + "% (" + std::to_string(rejected) + "/" + std::to_string(decided) +
                 ")",
             "cell-label", "middle");
    }
  }
  c.text(8, c.height() - 10,
         "cell: fraction of the mutant's observations the checker rejected (killed), with counts",
         "tick");
  return c.str();
}

namespace {

struct escape_group {
  int count = 0;
  std::vector<std::string> configs;
  const json* witness = nullptr; // a rejection of the same formula on the same inputs
};

std::string config_text(const json& cfg) {
  std::string shape;
  for (const auto& d : cfg.value("shape", json::array()))
    shape += (shape.empty() ? "" : "x") + d.dump();
  return shape + " " + cfg.value("dtype", std::string()) + " seed " +
         cfg.value("seed", json()).dump();
}

// Escapes: mutants accepted, grouped by (formula, column); `column` is the regime for grid
// observations and the protocol for preset observations.
std::string escapes(const std::vector<json>& records, const std::string& type,
                    const std::string& column_key) {
  std::map<std::pair<std::string, std::string>, escape_group> groups;
  std::map<std::pair<std::string, std::string>, const json*> rejections; // (formula, config)
  for (const auto& r : records)
    if (r.value("type", std::string()) == type && r.value("role", std::string()) == "mutant" &&
        r.value("verdict", std::string()) == "rejected")
      rejections.emplace(
          std::pair{r.value("implementation", std::string()), r.value("config", json()).dump()},
          &r);
  for (const auto& r : records) {
    if (r.value("type", std::string()) != type || r.value("role", std::string()) != "mutant" ||
        r.value("verdict", std::string()) != "accepted")
      continue;
    const auto impl = r.value("implementation", std::string());
    auto& g = groups[{impl, r.value(column_key, std::string())}];
    ++g.count;
    if (g.configs.size() < 3) g.configs.push_back(config_text(r.value("config", json())));
    if (!g.witness) {
      const auto it = rejections.find({impl, r.value("config", json()).dump()});
      if (it != rejections.end()) g.witness = it->second;
    }
  }
  if (groups.empty()) return "<p>No mutant escaped.</p>";
  std::vector<std::vector<std::string>> rows;
  for (const auto& [key, g] : groups) {
    std::string witness = "<span class=\"muted\">none: no check rejected it on these inputs</span>";
    if (g.witness) {
      // A preset observation keeps the stats of its first failing trial.
      const json fail = g.witness->value("first_failing_trial", json::object());
      const json st = g.witness->contains("stats") ? g.witness->value("stats", json::object())
                                                   : fail.value("stats", json::object());
      witness = "<code>" + text(g.witness->value("id", json())) + "</code> rejected it";
      if (fail.contains("trial")) witness += " at trial " + text(fail["trial"]);
      if (st.contains("max_abs_err"))
        witness += ": max abs error " + text(st["max_abs_err"]) + ", first mismatch at element " +
                   text(st.value("first_mismatch", json())) + " (" +
                   text(st.value("reason", json())) + ")";
    }
    rows.push_back({esc(key.first), esc(key.second), std::to_string(g.count), esc([&] {
                      std::string s;
                      for (const auto& c : g.configs)
                        s += (s.empty() ? "" : "; ") + c;
                      return s + (g.count > 3 ? "; ..." : "");
                    }()),
                    witness});
  }
  return table({"altered formula", column_key == "regime" ? "regime" : "protocol", "escapes",
                "inputs (first three)", "witness (same formula, same inputs)"},
               rows);
}

std::string controls_table(const json& matrix, const json& extra) {
  std::vector<std::vector<std::string>> rows;
  for (const json* m : {&matrix, &extra})
    for (const auto& [row, by_col] : m->items()) {
      if (!is_control(row)) continue;
      for (const auto& [col, v] : by_col.items()) {
        const int rejected = v.value("rejected", 0);
        rows.push_back(
            {esc(row), esc(col),
             std::to_string(v.value("accepted", 0)) + "/" + std::to_string(v.value("planned", 0)),
             rejected ? badge(std::to_string(rejected) + " false rejections", "fail")
                      : badge("none rejected", "pass")});
      }
    }
  return table({"control (a correct implementation)", "regime", "accepted", "rejected"}, rows);
}

} // namespace

// config.checker and config.backend are objects naming themselves; older files had strings.
// Raw text: callers escape it where it enters HTML.
std::string name_of(const json& v, const char* key) {
  const json& n = v.is_object() && v.contains(key) ? v[key] : v;
  return n.is_string() ? n.get<std::string>() : n.dump();
}

page_part audit_part(const json& doc) {
  const json s = doc.value("summary", json::object());
  const json cfg = doc.value("config", json::object());
  const std::string checker = name_of(cfg.value("checker", json()), "name");
  const json totals = s.value("totals", json::object());
  const json controls = s.value("controls", json::object());
  std::vector<json> records = doc.value("records", json::array()).get<std::vector<json>>();
  const int false_rejections = controls.value("rejected", 0) +
                               s.value("extra_control_totals", json::object()).value("rejected", 0);
  page_part p;
  p.verdict = false_rejections == 0 ? "controls all accepted" : "controls rejected";
  p.verdict_class = false_rejections == 0 ? "pass" : "fail";
  int escaped = 0;
  for (const auto& r : records)
    escaped += r.value("type", std::string()) == "observation" &&
                       r.value("role", std::string()) == "mutant" &&
                       r.value("verdict", std::string()) == "accepted"
                   ? 1
                   : 0;
  p.summary =
      "<p>audit <b>" + text(cfg.value("audit", json())) + "</b> under checker <b>" + esc(checker) +
      "</b> (backend " + esc(name_of(cfg.value("backend", json()), "backend")) +
      "): " + text(totals.value("planned", json())) + " observations, " +
      text(totals.value("accepted", json())) + " accepted, " +
      text(totals.value("rejected", json())) + " rejected, " +
      text(totals.value("errors", json())) + " errors, " + text(totals.value("missing", json())) +
      " missing</p><p>" +
      badge(std::to_string(escaped) + " mutant observations escaped", escaped ? "warn" : "pass") +
      " " +
      badge(std::to_string(false_rejections) + " correct kernels rejected",
            false_rejections ? "fail" : "pass") +
      "</p>";
  std::string maps = heat_map("Kill matrix under " + checker, s.value("matrix", json::object()),
                              "regime of the norm parameters");
  if (s.contains("presets") && s["presets"].is_object())
    maps += heat_map("Kill matrix by protocol preset", s["presets"], "protocol (checker preset)");
  p.body =
      section("Kill matrix", "<div class=\"plots\">" + maps + "</div>", "kill-matrix") +
      section("Controls", controls_table(s.value("matrix", json::object()),
                                         s.value("extra_controls", json::object()))) +
      section("Escapes under " + checker, escapes(records, "observation", "regime"), "escapes") +
      section("Escapes by protocol preset", escapes(records, "preset_observation", "protocol"));
  return p;
}

} // namespace kg::html
