// A user-supplied string made safe for a one-line message: control characters (a newline in a
// path, an option value, a JSON key) escaped as \n, \t, \r or \xHH, and cut to `max` characters
// (then "..."). Every layer's one-line errors quote user input through it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kg {

std::string printable(std::string_view s, std::size_t max = 200);

} // namespace kg
