// Outcome matrix of an audit: rows are implementations (mutants and controls), columns are input
// regimes or protocols. A rejected mutant is killed; an accepted mutant survived. Missing means
// planned but never observed: it is reported, never counted as a rejection.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kg {

enum class outcome { accepted, rejected, error, missing };
std::string_view outcome_name(outcome o);

struct outcome_counts {
  int accepted = 0;
  int rejected = 0;
  int error = 0;
  int missing = 0;
  int total() const { return accepted + rejected + error + missing; }
  void add(outcome o);
  nlohmann::json to_json() const;
};

class outcome_matrix {
public:
  outcome_matrix(std::vector<std::string> rows, std::vector<std::string> cols);
  // Every planned observation is first registered as missing, then resolved.
  void plan(std::string_view row, std::string_view col, int n = 1);
  void plan_every_cell(int n); // n planned observations in each cell
  void resolve(std::string_view row, std::string_view col, outcome o);
  const outcome_counts& cell(std::string_view row, std::string_view col) const;
  outcome_counts row_total(std::string_view row) const;
  outcome_counts total() const;
  const std::vector<std::string>& rows() const { return rows_; }
  const std::vector<std::string>& cols() const { return cols_; }
  nlohmann::json to_json() const;

private:
  std::vector<std::string> rows_, cols_;
  std::map<std::pair<std::string, std::string>, outcome_counts, std::less<>> cells_;
  outcome_counts& at(std::string_view row, std::string_view col);
};

} // namespace kg
