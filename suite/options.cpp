#include "suite/options.h"

#include <ostream>

#include "reports/json_input.h"

namespace kg {

bool read_options(const std::vector<std::string>& args, std::map<std::string, std::string>& opts,
                  std::ostream& err) {
  for (std::size_t i = 2; i < args.size(); i += 2) {
    if (!opts.count(args[i])) {
      err << "kernelgate: unknown option '" << printable(args[i]) << "' for " << args[1] << "\n";
      return false;
    }
    if (i + 1 >= args.size()) {
      err << "kernelgate: option '" << printable(args[i]) << "' needs a value\n";
      return false;
    }
    opts[args[i]] = args[i + 1];
  }
  return true;
}

} // namespace kg
