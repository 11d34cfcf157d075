#include "mutants/mutant_catalog.h"

#include <climits>
#include <cstdint>
#include <set>
#include <stdexcept>

#include "base/sha256.h"
#include "mutants/mutation_rules.h"

namespace kg {

std::string mutant_id(std::string_view rule, std::string_view path, int line, int column,
                      std::string_view original, std::string_view replacement) {
  sha256 h;
  const std::string where = std::to_string(line) + ":" + std::to_string(column);
  const char zero = '\0';
  bool first = true;
  for (std::string_view part : {rule, path, std::string_view(where), original, replacement}) {
    if (!first) h.update(&zero, 1);
    first = false;
    h.update(part.data(), part.size());
  }
  return h.finish_hex().substr(0, 16);
}

std::vector<mutant> generate_mutants(std::string_view source, const std::string& path,
                                     const std::string& task) {
  std::vector<mutant> out;
  std::set<std::string> ids;
  for (auto& s : find_mutation_sites(source)) {
    mutant m;
    m.id = mutant_id(s.rule, path, s.line, s.column, s.original, s.replacement);
    m.family = std::move(s.family);
    m.rule = std::move(s.rule);
    m.path = path;
    m.task = task;
    m.line = s.line;
    m.column = s.column;
    m.offset = s.offset;
    m.length = s.length;
    m.original = std::move(s.original);
    m.replacement = std::move(s.replacement);
    if (!ids.insert(m.id).second)
      throw std::logic_error("mutant id " + m.id + " repeats in " + path + " (rule " + m.rule +
                             " at " + std::to_string(m.line) + ":" + std::to_string(m.column) +
                             ")");
    out.push_back(std::move(m));
  }
  return out;
}

std::string apply_mutant(std::string_view source, const mutant& m) {
  if (m.offset > source.size() || m.length > source.size() - m.offset ||
      source.substr(m.offset, m.length) != m.original)
    throw std::invalid_argument("mutant " + m.id + " (" + m.rule + " at " + m.path + ":" +
                                std::to_string(m.line) + ":" + std::to_string(m.column) +
                                "): the source does not hold its original text there");
  std::string out;
  out.reserve(source.size() - m.length + m.replacement.size());
  out.append(source.substr(0, m.offset));
  out.append(m.replacement);
  out.append(source.substr(m.offset + m.length));
  return out;
}

std::vector<std::string> mutant_families() {
  std::vector<std::string> out;
  for (auto f : mutation_family_names())
    out.emplace_back(f);
  return out;
}

nlohmann::json to_json(const mutant& m) {
  return {{"id", m.id},
          {"family", m.family},
          {"rule", m.rule},
          {"path", m.path},
          {"task", m.task},
          {"line", m.line},
          {"column", m.column},
          {"offset", m.offset},
          {"length", m.length},
          {"original", m.original},
          {"replacement", m.replacement}};
}

mutant mutant_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw std::invalid_argument("a mutant is a JSON object");
  auto text = [&](const char* k) {
    if (!j.contains(k) || !j[k].is_string())
      throw std::invalid_argument(std::string("mutant: '") + k + "' must be a string");
    return j[k].get<std::string>();
  };
  auto number = [&](const char* k, std::uint64_t max) {
    if (!j.contains(k) || !j[k].is_number_integer() ||
        (j[k].is_number_unsigned()
             ? j[k].get<std::uint64_t>() > max
             : j[k].get<std::int64_t>() < 0 ||
                   static_cast<std::uint64_t>(j[k].get<std::int64_t>()) > max))
      throw std::invalid_argument(std::string("mutant: '") + k + "' must be a whole number >= 0");
    return j[k].get<std::uint64_t>();
  };
  mutant m;
  m.id = text("id");
  m.family = text("family");
  m.rule = text("rule");
  m.path = text("path");
  m.task = text("task");
  m.line = static_cast<int>(number("line", INT_MAX));
  m.column = static_cast<int>(number("column", INT_MAX));
  m.offset = static_cast<std::size_t>(number("offset", SIZE_MAX));
  m.length = static_cast<std::size_t>(number("length", SIZE_MAX));
  m.original = text("original");
  m.replacement = text("replacement");
  return m;
}

} // namespace kg
