#include "suite/suite_command.h"

#include <algorithm>
#include <cstdio>
#include <ostream>

#include "reports/json_input.h"
#include "suite/exit_codes.h"

namespace kg {
namespace {

std::string minutes(double seconds, int width = 0) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%*.1f min", width, seconds / 60);
  return buf;
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

int bad_input(std::ostream& err, const std::string& why) {
  err << "kernelgate: " << printable(why, 600) << "\n";
  return exit_code::bad_input;
}

// The table of `suite show`: one row a workload, columns padded to their widest cell (the cost
// right-aligned), a blank line between set-up groups (each group is one engine, partition or
// training set-up the run builds once).
std::string show_table(const std::vector<suite_workload>& ordered) {
  std::vector<std::vector<std::string>> rows = {
      {"id", "level", "setup", "metric", "SOL bound", "cost s"}};
  for (const auto& w : ordered)
    rows.push_back({w.id, w.level, w.setup,
                    w.metric.name + " (" + w.metric.unit + ", " + w.metric.direction + ")",
                    format_sol_bound(w.sol), seconds_text(w.cost_seconds)});
  std::vector<std::size_t> width(rows.front().size(), 0);
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size(); ++i)
      width[i] = std::max(width[i], r[i].size());
  std::string out;
  for (std::size_t k = 0; k < rows.size(); ++k) {
    if (k > 1 && ordered[k - 1].setup != ordered[k - 2].setup) out += "\n";
    const auto& r = rows[k];
    for (std::size_t i = 0; i + 1 < r.size(); ++i)
      out += r[i] + std::string(width[i] - r[i].size() + 2, ' ');
    out += std::string(width.back() - r.back().size(), ' ') + r.back() + "\n";
  }
  return out;
}

} // namespace

int run_suite_list_command(const suite_options& o, std::ostream& out, std::ostream& err) {
  const auto names = suite_names(o.suites_dir);
  if (names.empty())
    return bad_input(err, "no suite files in '" + o.suites_dir.string() +
                              "' (KERNELGATE_SUITES_DIR names the folder)");
  std::size_t width = 0;
  for (const auto& n : names)
    width = std::max(width, n.size());
  out << "suites in " << o.suites_dir.string() << ":\n";
  for (const auto& n : names) {
    try {
      const auto s = load_suite_validated(n, o.suites_dir);
      char counts[64];
      std::snprintf(counts, sizeof counts, "%4zu workloads  about %s", s.workloads.size(),
                    minutes(total_cost_seconds(s.workloads), 5).c_str());
      out << "  " << n << std::string(width - n.size(), ' ') << "  " << counts << "  "
          << s.description << "\n";
    } catch (const suite_error& e) {
      return bad_input(err, e.what());
    }
  }
  return exit_code::ok;
}

int run_suite_show_command(const suite_options& o, std::ostream& out, std::ostream& err) {
  if (o.markdown && o.json)
    return bad_input(err, "suite show: --markdown and --json exclude each other");
  suite_def s;
  std::size_t all = 0;
  try {
    s = load_suite_validated(o.suite, o.suites_dir);
    all = s.workloads.size();
    if (!o.filter.empty()) s.workloads = filter_workloads(std::move(s.workloads), o.filter);
  } catch (const suite_error& e) {
    return bad_input(err, e.what());
  }
  if (s.workloads.empty())
    return bad_input(err, "no workload of '" + s.name + "' matches --filter '" + o.filter + "'");
  s.workloads = order_for_run(std::move(s.workloads));
  if (o.markdown) {
    out << suite_markdown_table(s);
  } else if (o.json) {
    out << suite_json(s).dump(2) << "\n";
  } else {
    out << s.name << " (" << s.source_file << "): " << s.description << "\n\n"
        << show_table(s.workloads) << "\n"
        << s.workloads.size() << (o.filter.empty() ? "" : " of " + std::to_string(all))
        << " workloads in run order, about " << seconds_text(total_cost_seconds(s.workloads))
        << " s (" << minutes(total_cost_seconds(s.workloads)) << ") of measurement\n";
  }
  return exit_code::ok;
}

} // namespace kg
