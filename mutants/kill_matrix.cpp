#include "mutants/kill_matrix.h"

#include <algorithm>
#include <stdexcept>

namespace kg {

namespace {

constexpr std::pair<witness_status, std::string_view> status_names[] = {
    {witness_status::witnessed, "witnessed"},   {witness_status::unwitnessed, "unwitnessed"},
    {witness_status::equivalent, "equivalent"}, {witness_status::compile_error, "compile_error"},
    {witness_status::not_run, "not_run"},
};

constexpr kill_verdict verdicts[] = {kill_verdict::killed, kill_verdict::survived,
                                     kill_verdict::error, kill_verdict::timeout,
                                     kill_verdict::missing};

bool valid_letter(char c) {
  return std::any_of(std::begin(verdicts), std::end(verdicts),
                     [c](kill_verdict v) { return static_cast<char>(v) == c; });
}

std::string in_quotes(std::string_view s) {
  return "'" + std::string(s) + "'";
}

} // namespace

std::string_view witness_status_name(witness_status s) {
  for (const auto& [v, name] : status_names)
    if (v == s) return name;
  return "?";
}

witness_status witness_status_from_name(std::string_view name) {
  for (const auto& [v, n] : status_names)
    if (n == name) return v;
  throw std::invalid_argument("unknown witness status " + in_quotes(name));
}

std::string_view kill_verdict_name(kill_verdict v) {
  switch (v) {
  case kill_verdict::killed:
    return "killed";
  case kill_verdict::survived:
    return "survived";
  case kill_verdict::error:
    return "error";
  case kill_verdict::timeout:
    return "timeout";
  case kill_verdict::missing:
    break;
  }
  return "missing";
}

// ---- scores ------------------------------------------------------------------------------------

double checker_score::mutation_score() const {
  return aligned() > 0 ? static_cast<double>(killed) / aligned() : 0.0;
}
interval checker_score::score_ci95() const {
  return wilson_interval(killed, aligned());
}
double checker_score::escape_rate() const {
  return aligned() > 0 ? static_cast<double>(survived) / aligned() : 0.0;
}
interval checker_score::escape_ci95() const {
  return wilson_interval(survived, aligned());
}

nlohmann::json checker_score::to_json() const {
  const auto s = score_ci95(), e = escape_ci95();
  return {{"intended", intended},
          {"aligned", aligned()},
          {"killed", killed},
          {"survived", survived},
          {"excluded", {{"checker_error", errors}, {"timeout", timeouts}, {"missing", missing}}},
          {"mutation_score", mutation_score()},
          {"mutation_score_ci95", {s.lo, s.hi}},
          {"escape_rate", escape_rate()},
          {"escape_rate_ci95", {e.lo, e.hi}}};
}

// ---- the matrix --------------------------------------------------------------------------------

kill_matrix::kill_matrix(std::vector<kill_row> rows, std::vector<std::string> checkers)
    : rows_(std::move(rows)), checkers_(std::move(checkers)),
      cells_(checkers_.size(),
             std::string(rows_.size(), static_cast<char>(kill_verdict::missing))) {
  index();
}

void kill_matrix::index() {
  row_of_.clear();
  checker_of_.clear();
  for (std::size_t i = 0; i < rows_.size(); ++i)
    if (!row_of_.emplace(rows_[i].id, i).second)
      throw std::invalid_argument("kill matrix: row " + in_quotes(rows_[i].id) + " appears twice");
  for (std::size_t j = 0; j < checkers_.size(); ++j)
    if (!checker_of_.emplace(checkers_[j], j).second)
      throw std::invalid_argument("kill matrix: checker " + in_quotes(checkers_[j]) +
                                  " appears twice");
}

std::size_t kill_matrix::row_index(std::string_view id) const {
  const auto it = row_of_.find(id);
  if (it == row_of_.end()) throw std::out_of_range("kill matrix: no row " + in_quotes(id));
  return it->second;
}

std::size_t kill_matrix::checker_index(std::string_view name) const {
  const auto it = checker_of_.find(name);
  if (it == checker_of_.end()) throw std::out_of_range("kill matrix: no checker " + in_quotes(name));
  return it->second;
}

kill_verdict kill_matrix::at(std::string_view id, std::string_view checker) const {
  return static_cast<kill_verdict>(cells_[checker_index(checker)][row_index(id)]);
}

void kill_matrix::set(std::string_view id, std::string_view checker, kill_verdict v) {
  cells_[checker_index(checker)][row_index(id)] = static_cast<char>(v);
}

void kill_matrix::set_status(std::string_view id, witness_status s) {
  rows_[row_index(id)].status = s;
}

checker_score kill_matrix::score(std::string_view checker, std::string_view family) const {
  const auto& col = cells_[checker_index(checker)];
  checker_score s;
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    const auto& r = rows_[i];
    if (r.control || r.status != witness_status::witnessed) continue;
    if (!family.empty() && r.family != family) continue;
    ++s.intended;
    switch (static_cast<kill_verdict>(col[i])) {
    case kill_verdict::killed:
      ++s.killed;
      break;
    case kill_verdict::survived:
      ++s.survived;
      break;
    case kill_verdict::error:
      ++s.errors;
      break;
    case kill_verdict::timeout:
      ++s.timeouts;
      break;
    case kill_verdict::missing:
      ++s.missing;
      break;
    }
  }
  return s;
}

std::map<std::string, checker_score> kill_matrix::score_by_family(std::string_view checker) const {
  std::map<std::string, checker_score> out;
  for (const auto& r : rows_)
    if (!r.control && r.status == witness_status::witnessed && !out.count(r.family))
      out[r.family] = score(checker, r.family);
  return out;
}

std::vector<const kill_row*> kill_matrix::false_rejections(std::string_view checker) const {
  const auto& col = cells_[checker_index(checker)];
  std::vector<const kill_row*> out;
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    const auto v = static_cast<kill_verdict>(col[i]);
    if (rows_[i].control && v != kill_verdict::survived && v != kill_verdict::missing)
      out.push_back(&rows_[i]);
  }
  return out;
}

std::vector<const kill_row*> kill_matrix::escapes(std::string_view checker) const {
  const auto& col = cells_[checker_index(checker)];
  std::vector<const kill_row*> out;
  for (std::size_t i = 0; i < rows_.size(); ++i)
    if (!rows_[i].control && rows_[i].status == witness_status::witnessed &&
        static_cast<kill_verdict>(col[i]) == kill_verdict::survived)
      out.push_back(&rows_[i]);
  return out;
}

// ---- storage -----------------------------------------------------------------------------------

nlohmann::json kill_matrix::to_json() const {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : rows_)
    rows.push_back({{"id", r.id},
                    {"family", r.family},
                    {"task", r.task},
                    {"status", witness_status_name(r.status)},
                    {"control", r.control}});
  nlohmann::json cells = nlohmann::json::object();
  for (std::size_t j = 0; j < checkers_.size(); ++j)
    cells[checkers_[j]] = cells_[j];
  return {{"type", "kill_matrix"},
          {"verdict_letters", "K killed, S survived, E checker error, T timeout, . missing"},
          {"rows", rows},
          {"checkers", checkers_},
          {"cells", cells}};
}

kill_matrix kill_matrix::from_json(const nlohmann::json& j) {
  auto field = [](const nlohmann::json& o, const char* key) -> const nlohmann::json& {
    if (!o.is_object() || !o.contains(key))
      throw std::invalid_argument(std::string("kill matrix: no \"") + key + "\"");
    return o[key];
  };
  auto text = [&](const nlohmann::json& o, const char* key) {
    const auto& v = field(o, key);
    if (!v.is_string())
      throw std::invalid_argument(std::string("kill matrix: \"") + key + "\" is not a string");
    return v.get<std::string>();
  };
  const auto& rows_j = field(j, "rows");
  const auto& checkers_j = field(j, "checkers");
  const auto& cells_j = field(j, "cells");
  if (!rows_j.is_array() || !checkers_j.is_array() || !cells_j.is_object())
    throw std::invalid_argument("kill matrix: rows and checkers must be arrays, cells an object");
  std::vector<kill_row> rows;
  for (const auto& r : rows_j) {
    const auto& control = field(r, "control");
    if (!control.is_boolean())
      throw std::invalid_argument("kill matrix: \"control\" is not a boolean");
    rows.push_back({text(r, "id"), text(r, "family"), text(r, "task"),
                    witness_status_from_name(text(r, "status")), control.get<bool>()});
  }
  std::vector<std::string> checkers;
  for (const auto& c : checkers_j) {
    if (!c.is_string()) throw std::invalid_argument("kill matrix: a checker is not a string");
    checkers.push_back(c.get<std::string>());
  }
  kill_matrix m(std::move(rows), std::move(checkers));
  for (std::size_t k = 0; k < m.checkers_.size(); ++k) {
    const auto& name = m.checkers_[k];
    const auto col = text(cells_j, name.c_str());
    if (col.size() != m.rows_.size())
      throw std::invalid_argument("kill matrix: checker " + in_quotes(name) + " has " +
                                  std::to_string(col.size()) + " verdicts for " +
                                  std::to_string(m.rows_.size()) + " rows");
    for (const char c : col)
      if (!valid_letter(c))
        throw std::invalid_argument("kill matrix: checker " + in_quotes(name) +
                                    " has an unknown verdict letter " + in_quotes(std::string(1, c)));
    m.cells_[k] = col;
  }
  return m;
}

kill_matrix kill_matrix::merge(const kill_matrix& a, const kill_matrix& b) {
  std::vector<kill_row> rows = a.rows_;
  for (const auto& r : b.rows_) {
    const auto it = a.row_of_.find(r.id);
    if (it == a.row_of_.end()) {
      rows.push_back(r);
      continue;
    }
    auto& mine = rows[it->second];
    if (mine.family != r.family || mine.task != r.task || mine.control != r.control)
      throw std::invalid_argument("kill matrix merge: row " + in_quotes(r.id) +
                                  " differs in family, task or control between the runs");
    if (mine.status == witness_status::not_run) {
      mine.status = r.status;
    } else if (r.status != witness_status::not_run && r.status != mine.status) {
      throw std::invalid_argument("kill matrix merge: row " + in_quotes(r.id) + " is " +
                                  std::string(witness_status_name(mine.status)) + " in one run, " +
                                  std::string(witness_status_name(r.status)) + " in the other");
    }
  }
  std::vector<std::string> checkers = a.checkers_;
  for (const auto& c : b.checkers_)
    if (!a.checker_of_.count(c)) checkers.push_back(c);
  kill_matrix m(std::move(rows), std::move(checkers));
  for (const auto* src : {&a, &b})
    for (std::size_t k = 0; k < src->checkers_.size(); ++k)
      for (std::size_t i = 0; i < src->rows_.size(); ++i) {
        const char v = src->cells_[k][i];
        if (v == static_cast<char>(kill_verdict::missing)) continue;
        char& cell = m.cells_[m.checker_index(src->checkers_[k])][m.row_index(src->rows_[i].id)];
        if (cell != static_cast<char>(kill_verdict::missing) && cell != v)
          throw std::invalid_argument(
              "kill matrix merge: " + in_quotes(src->rows_[i].id) + " x " + in_quotes(src->checkers_[k]) +
              " is " + std::string(kill_verdict_name(static_cast<kill_verdict>(cell))) +
              " in one run, " + std::string(kill_verdict_name(static_cast<kill_verdict>(v))) +
              " in the other");
        cell = v;
      }
  return m;
}

} // namespace kg
