#include "suite/report_command.h"

#include <filesystem>
#include <ostream>

#include "base/printable.h"
#include "reports/html_report.h"
#include "reports/result_writer.h"
#include "suite/exit_codes.h"

namespace kg {

int run_report_command(const report_options& o, std::ostream& out, std::ostream& err) {
  namespace fs = std::filesystem;
  std::vector<fs::path> results(o.results.begin(), o.results.end());
  std::optional<fs::path> baseline, history;
  if (o.baseline) baseline = fs::path(*o.baseline);
  if (o.history) history = fs::path(*o.history);
  std::string page;
  try {
    page = html_report(results, baseline, history);
  } catch (const report_error& e) {
    err << "kernelgate: report: " << printable(e.what(), 400) << "\n";
    return exit_code::bad_input;
  }
  try {
    write_file_atomically(o.html, page);
  } catch (const std::exception& e) {
    err << "kernelgate: report: cannot write --html '" << printable(o.html)
        << "': " << printable(e.what(), 300) << "\n";
    return exit_code::bad_input;
  }
  out << "Wrote " << o.html << " (" << page.size() / 1024 << " KiB)\n";
  return exit_code::ok;
}

} // namespace kg
