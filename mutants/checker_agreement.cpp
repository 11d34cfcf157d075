#include "mutants/checker_agreement.h"

#include <stdexcept>

namespace kg {

namespace {

bool decided(kill_verdict v) {
  return v == kill_verdict::killed || v == kill_verdict::survived;
}

} // namespace

checker_agreement compare_checkers(const kill_matrix& a, std::string_view ca, const kill_matrix& b,
                                   std::string_view cb) {
  (void)a.checker_index(ca); // (throws for an unknown column before anything is counted)
  (void)b.checker_index(cb);
  checker_agreement r;
  r.checker_a = ca;
  r.checker_b = cb;
  for (const auto& row : a.rows()) {
    std::size_t j = 0;
    try {
      j = b.row_index(row.id);
    } catch (const std::out_of_range&) {
      ++r.only_in_a;
      continue;
    }
    const auto& other = b.rows()[j];
    if (other.task != row.task || other.control != row.control)
      throw std::invalid_argument("row '" + row.id +
                                  "' is not the same candidate in both "
                                  "matrices (task or control flag differs)");
    const auto va = a.at(row.id, ca), vb = b.at(row.id, cb);
    if (!decided(va)) {
      ++r.no_verdict_a;
      continue;
    }
    if (!decided(vb)) {
      ++r.no_verdict_b;
      continue;
    }
    ++r.compared;
    if (row.control) ++r.compared_controls;
    if (!row.control && row.status == witness_status::witnessed) ++r.compared_witnessed;
    if (va == vb) {
      ++r.same;
      continue;
    }
    (va == kill_verdict::killed ? r.killed_by_a_only : r.killed_by_b_only) += 1;
    r.differences.push_back({row, va, vb});
  }
  for (const auto& row : b.rows()) {
    try {
      (void)a.row_index(row.id);
    } catch (const std::out_of_range&) {
      ++r.only_in_b;
    }
  }
  return r;
}

nlohmann::json checker_agreement::to_json() const {
  const auto ci = rate_ci95();
  nlohmann::json d = nlohmann::json::array();
  for (const auto& x : differences)
    d.push_back({{"id", x.row.id},
                 {"task", x.row.task},
                 {"family", x.row.family},
                 {"control", x.row.control},
                 {"status", witness_status_name(x.row.status)},
                 {"first", kill_verdict_name(x.a)},
                 {"second", kill_verdict_name(x.b)}});
  return {{"checkers", {checker_a, checker_b}},
          {"compared", compared},
          {"compared_controls", compared_controls},
          {"compared_witnessed", compared_witnessed},
          {"same", same},
          {"agreement", rate()},
          {"agreement_ci95", {ci.lo, ci.hi}},
          {"killed_only_by", {{checker_a, killed_by_a_only}, {checker_b, killed_by_b_only}}},
          {"left_out",
           {{"only_in_first", only_in_a},
            {"only_in_second", only_in_b},
            {"no_verdict_first", no_verdict_a},
            {"no_verdict_second", no_verdict_b}}},
          {"differences", d}};
}

} // namespace kg
