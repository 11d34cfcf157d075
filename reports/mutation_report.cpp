#include "reports/mutation_report.h"

#include <stdexcept>

namespace kg {

namespace {

// The position just past `text` when it starts at (line, column): columns count bytes from 1, as
// the catalog's do; the end is exclusive, as the format's is.
nlohmann::json end_position(int line, int column, const std::string& text) {
  for (const char c : text) {
    if (c == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {{"line", line}, {"column", column}};
}

struct status_and_reason {
  const char* status;
  std::string reason;
};

status_and_reason status_of(const kill_row& row, kill_verdict v) {
  switch (row.status) {
  case witness_status::compile_error:
    return {"CompileError", "the mutant does not compile"};
  case witness_status::equivalent:
    return {"Ignored", "equivalent: its SASS equals the original's; not run"};
  case witness_status::unwitnessed:
    return {"Ignored", "unwitnessed: no input tried shows it wrong; never counted as an escape"};
  case witness_status::not_run:
    return {"Pending", "not yet witnessed"};
  case witness_status::witnessed:
    break;
  }
  switch (v) {
  case kill_verdict::killed:
    return {"Killed", "the checker rejected it"};
  case kill_verdict::survived:
    return {"Survived", "the checker accepted a kernel the fp64 oracle shows wrong"};
  case kill_verdict::error:
    return {"RuntimeError", "the checker failed on it (not counted either way)"};
  case kill_verdict::timeout:
    return {"Timeout", "the checker did not answer in time (not counted either way)"};
  case kill_verdict::missing:
    break;
  }
  return {"NoCoverage", "the checker gave no verdict: unknown, not counted"};
}

} // namespace

nlohmann::json mutation_report(const kill_matrix& matrix, const std::string& checker,
                               const std::vector<mutant>& catalog,
                               const std::map<std::string, std::string>& sources,
                               const mutation_report_options& opt) {
  (void)matrix.checker_index(checker); // an unknown checker throws here, not per mutant
  nlohmann::json files = nlohmann::json::object();
  for (const auto& m : catalog) {
    std::size_t row = 0;
    try {
      row = matrix.row_index(m.id);
    } catch (const std::out_of_range&) {
      continue; // not audited in this matrix
    }
    const auto src = sources.find(m.path);
    if (src == sources.end())
      throw std::invalid_argument("mutation report: no source for " + m.path);
    if (src->second.compare(m.offset, m.length, m.original) != 0)
      throw std::invalid_argument("mutation report: " + m.path + " does not hold mutant " + m.id +
                                  "'s original text at its offset");
    auto& file = files[m.path];
    if (file.is_null())
      file = {{"language", "cpp"}, {"source", src->second}, {"mutants", nlohmann::json::array()}};
    const auto& r = matrix.rows()[row];
    const auto s = status_of(r, matrix.at(m.id, checker));
    file["mutants"].push_back({{"id", m.id},
                               {"mutatorName", m.family + "/" + m.rule},
                               {"replacement", m.replacement},
                               {"description", "'" + m.original + "' -> '" + m.replacement + "'"},
                               {"location",
                                {{"start", {{"line", m.line}, {"column", m.column}}},
                                 {"end", end_position(m.line, m.column, m.original)}}},
                               {"status", s.status},
                               {"statusReason", s.reason}});
  }
  nlohmann::json report = {
      {"schemaVersion", "2"},
      {"thresholds", {{"high", opt.threshold_high}, {"low", opt.threshold_low}}},
      {"framework", {{"name", "kernelgate"}}},
      {"config", {{"checker", checker}}},
      {"files", files}};
  if (!opt.project_root.empty()) report["projectRoot"] = opt.project_root;
  return report;
}

} // namespace kg
