#include "mutants/outcome_matrix.h"
#include "base/name_table.h"

#include <stdexcept>

namespace kg {

namespace {

constexpr name_table<outcome, 4> outcome_names{{
    {outcome::accepted, "accepted"},
    {outcome::rejected, "rejected"},
    {outcome::error, "error"},
    {outcome::missing, "missing"},
}};

} // namespace

std::string_view outcome_name(outcome o) {
  return name_of(outcome_names, o);
}

void outcome_counts::add(outcome o) {
  switch (o) {
  case outcome::accepted:
    ++accepted;
    break;
  case outcome::rejected:
    ++rejected;
    break;
  case outcome::error:
    ++error;
    break;
  case outcome::missing:
    ++missing;
    break;
  }
}

nlohmann::json outcome_counts::to_json() const {
  return {{"accepted", accepted},
          {"rejected", rejected},
          {"errors", error},
          {"missing", missing},
          {"planned", total()}};
}

outcome_matrix::outcome_matrix(std::vector<std::string> rows, std::vector<std::string> cols)
    : rows_(std::move(rows)), cols_(std::move(cols)) {
  for (const auto& r : rows_)
    for (const auto& c : cols_)
      cells_[{r, c}] = {};
}

outcome_counts& outcome_matrix::at(std::string_view row, std::string_view col) {
  auto it = cells_.find(std::pair<std::string, std::string>(row, col));
  if (it == cells_.end())
    throw std::out_of_range("outcome matrix has no cell " + std::string(row) + "/" +
                            std::string(col));
  return it->second;
}

void outcome_matrix::plan(std::string_view row, std::string_view col, int n) {
  at(row, col).missing += n;
}

void outcome_matrix::plan_every_cell(int n) {
  for (auto& [key, counts] : cells_)
    counts.missing += n;
}

void outcome_matrix::resolve(std::string_view row, std::string_view col, outcome o) {
  auto& c = at(row, col);
  if (c.missing <= 0) throw std::logic_error("resolving an observation that was never planned");
  --c.missing;
  c.add(o);
}

const outcome_counts& outcome_matrix::cell(std::string_view row, std::string_view col) const {
  return const_cast<outcome_matrix*>(this)->at(row, col);
}

outcome_counts outcome_matrix::row_total(std::string_view row) const {
  outcome_counts t;
  for (const auto& c : cols_) {
    const auto& x = cell(row, c);
    t.accepted += x.accepted;
    t.rejected += x.rejected;
    t.error += x.error;
    t.missing += x.missing;
  }
  return t;
}

outcome_counts outcome_matrix::total() const {
  outcome_counts t;
  for (const auto& r : rows_) {
    const auto x = row_total(r);
    t.accepted += x.accepted;
    t.rejected += x.rejected;
    t.error += x.error;
    t.missing += x.missing;
  }
  return t;
}

nlohmann::json outcome_matrix::to_json() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& r : rows_) {
    nlohmann::json row = nlohmann::json::object();
    for (const auto& c : cols_)
      row[c] = cell(r, c).to_json();
    out[r] = row;
  }
  return out;
}

} // namespace kg
