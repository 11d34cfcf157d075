// "--key value" options of a command whose options all take values and have defaults.
#pragma once

#include <iosfwd>
#include <map>
#include <string>
#include <vector>

namespace kg {

// Overwrites the defaults in `opts` with the pairs after args[0] and args[1] (program, command).
// An option not in `opts`, or one without a value, prints one line naming it and returns false.
bool read_options(const std::vector<std::string>& args, std::map<std::string, std::string>& opts,
                  std::ostream& err);

} // namespace kg
