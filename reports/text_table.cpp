#include "reports/text_table.h"

#include <algorithm>
#include <sstream>

namespace kg {

std::string text_table::render() const {
  std::vector<std::size_t> width(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& r) {
    for (std::size_t i = 0; i < r.size() && i < width.size(); ++i)
      width[i] = std::max(width[i], r[i].size());
  };
  measure(header_);
  for (const auto& r : rows_)
    measure(r);
  std::size_t total = 0;
  for (auto w : width)
    total += w + 3;
  std::ostringstream out;
  auto line = [&](const std::vector<std::string>& r) {
    for (std::size_t i = 0; i < width.size(); ++i) {
      const std::string cell = i < r.size() ? r[i] : "";
      const std::string pad(width[i] - cell.size(), ' ');
      out << (i == 0 ? cell + pad : pad + cell) << (i + 1 < width.size() ? " | " : "\n");
    }
  };
  line(header_);
  out << std::string(total > 3 ? total - 3 : 0, '-') << '\n';
  for (const auto& r : rows_) {
    if (r.empty())
      out << std::string(total > 3 ? total - 3 : 0, '-') << '\n';
    else
      line(r);
  }
  return out.str();
}

} // namespace kg
