// One table of names serves both directions for a closed set (an enum): name_of and parse_name
// read the same array, so a name and its parse cannot drift apart.
#pragma once

#include <array>
#include <optional>
#include <string_view>
#include <utility>

namespace kg {

template <class E, std::size_t N>
using name_table = std::array<std::pair<E, std::string_view>, N>;

template <class E, std::size_t N>
constexpr std::string_view name_of(const name_table<E, N>& table, E value,
                                   std::string_view otherwise = "unknown") {
  for (const auto& [v, name] : table)
    if (v == value) return name;
  return otherwise;
}

template <class E, std::size_t N>
constexpr std::optional<E> parse_name(const name_table<E, N>& table, std::string_view name) {
  for (const auto& [v, n] : table)
    if (n == name) return v;
  return std::nullopt;
}

} // namespace kg
