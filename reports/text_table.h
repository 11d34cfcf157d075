// Plain-text tables for the terminal: left-aligned first column, right-aligned others.
#pragma once

#include <string>
#include <vector>

namespace kg {

class text_table {
public:
  explicit text_table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add_row(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void add_rule() { rows_.push_back({}); }
  std::string render() const;

private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_; // an empty row is a horizontal rule
};

} // namespace kg
