#include "reports/json_schema.h"

#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <regex>
#include <stdexcept>
#include <string_view>

#include <pthread.h>

namespace kg {

namespace {

using nlohmann::json;

// Recursion guard: a $ref cycle that never descends into the document (e.g. a definition that
// refers to itself) would otherwise recurse until the stack overflows.
constexpr int max_depth = 256;

struct issue {
  std::string path;
  std::string message;
  bool schema_fault = false; // the schema is malformed, not the document
};

std::string escape_pointer_token(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  for (char c : token) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

std::string child_path(const std::string& parent, std::string_view key) {
  return parent + '/' + escape_pointer_token(key);
}

std::string child_path(const std::string& parent, std::size_t index) {
  return parent + '/' + std::to_string(index);
}

// The document's type as the schema spells it; integral numbers report as "integer".
std::string type_name(const json& v) {
  switch (v.type()) {
  case json::value_t::null:
    return "null";
  case json::value_t::boolean:
    return "boolean";
  case json::value_t::number_integer:
  case json::value_t::number_unsigned:
    return "integer";
  case json::value_t::number_float:
    return "number";
  case json::value_t::string:
    return "string";
  case json::value_t::array:
    return "array";
  case json::value_t::object:
    return "object";
  default:
    return "unknown";
  }
}

// JSON Schema defines "integer" by value, not by spelling: 3.0 is an integer.
bool is_integral(const json& v) {
  if (v.is_number_integer()) return true; // includes unsigned
  if (!v.is_number_float()) return false;
  const double d = v.get<double>();
  return std::isfinite(d) && std::floor(d) == d;
}

bool matches_type(const json& v, std::string_view type) {
  if (type == "null") return v.is_null();
  if (type == "boolean") return v.is_boolean();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "number") return v.is_number();
  if (type == "integer") return is_integral(v);
  return false;
}

bool known_type(std::string_view type) {
  return type == "null" || type == "boolean" || type == "object" || type == "array" ||
         type == "string" || type == "number" || type == "integer";
}

// minLength/maxLength count Unicode code points; UTF-8 continuation bytes are 10xxxxxx.
std::size_t code_points(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xc0) != 0x80) ++n;
  return n;
}

// Keeps messages readable when an enum or const holds a large value.
// libstdc++'s regex executor recurses once per character of the subject: a 100 KB string
// overflows an 8 MB stack. Subjects past a few thousand characters are searched on a thread of
// their own with a stack sized for them; past max_pattern_subject they are not searched at all.
constexpr std::size_t max_pattern_subject = std::size_t{1} << 18;

bool bounded_search(const std::string& text, const std::regex& re) {
  if (text.size() <= 2048) return std::regex_search(text, re);
  struct job {
    const std::string* text;
    const std::regex* re;
    bool found = false;
    bool failed = false;
  } j{&text, &re};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, (std::size_t{64} << 20) + 2048 * text.size());
  pthread_t t;
  const int rc = pthread_create(
      &t, &attr,
      [](void* p) -> void* {
        auto* jp = static_cast<job*>(p);
        try {
          jp->found = std::regex_search(*jp->text, *jp->re);
        } catch (const std::regex_error&) { // error_complexity, error_stack
          jp->failed = true;
        }
        return nullptr;
      },
      &j);
  pthread_attr_destroy(&attr);
  if (rc != 0) throw std::runtime_error("cannot start a thread for a pattern check");
  pthread_join(t, nullptr);
  return j.found && !j.failed;
}

std::string short_dump(const json& v) {
  std::string s = v.dump();
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

// URI fragments may percent-encode characters ("%24defs"); decode before pointer parsing.
std::string percent_decode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

class validator {
public:
  explicit validator(const json& root) : root_(root) {}

  void check(const json& schema, const json& doc, const std::string& path, std::vector<issue>& out,
             int depth) {
    if (depth > max_depth) {
      fault(out, path,
            "schema nesting exceeds " + std::to_string(max_depth) +
                " levels (is there a $ref cycle?)");
      return;
    }
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) out.push_back({path, "no value is allowed here (schema is false)"});
      return;
    }
    if (!schema.is_object()) {
      fault(out, path, "a schema must be an object or a boolean, got " + type_name(schema));
      return;
    }
    check_ref(schema, doc, path, out, depth);
    check_type(schema, doc, path, out);
    check_enum_const(schema, doc, path, out);
    check_numeric(schema, doc, path, out);
    check_string(schema, doc, path, out);
    check_array(schema, doc, path, out, depth);
    check_object(schema, doc, path, out, depth);
    check_combinators(schema, doc, path, out, depth);
  }

private:
  static void fault(std::vector<issue>& out, const std::string& path, std::string message) {
    out.push_back({path, "invalid schema: " + std::move(message), true});
  }

  // Evaluates a subschema in isolation, for keywords (anyOf, oneOf, not, if) that need to know
  // whether it passed without reporting its errors. Schema faults still surface in `out`, so a
  // broken branch cannot hide behind a combinator.
  bool passes(const json& schema, const json& doc, const std::string& path, std::vector<issue>& out,
              int depth) {
    std::vector<issue> local;
    check(schema, doc, path, local, depth + 1);
    for (auto& e : local)
      if (e.schema_fault) out.push_back(std::move(e));
    return local.empty();
  }

  void check_ref(const json& schema, const json& doc, const std::string& path,
                 std::vector<issue>& out, int depth) {
    const auto it = schema.find("$ref");
    if (it == schema.end()) return;
    if (!it->is_string()) {
      fault(out, path, "$ref must be a string");
      return;
    }
    const std::string& ref = it->get_ref<const std::string&>();
    if (ref.empty() || ref[0] != '#') {
      fault(out, path, "only local $ref (starting with '#') is supported: " + ref);
      return;
    }
    const json* target = nullptr;
    try {
      const json::json_pointer pointer(percent_decode(std::string_view(ref).substr(1)));
      if (root_.contains(pointer)) target = &root_.at(pointer);
    } catch (const json::exception&) {
      // A malformed pointer is reported below like a missing target.
    }
    if (target == nullptr) {
      fault(out, path, "unresolvable $ref " + ref);
      return;
    }
    check(*target, doc, path, out, depth + 1);
  }

  void check_type(const json& schema, const json& doc, const std::string& path,
                  std::vector<issue>& out) {
    const auto it = schema.find("type");
    if (it == schema.end()) return;
    std::vector<std::string> allowed;
    if (it->is_string()) {
      allowed.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      for (const auto& t : *it) {
        if (!t.is_string()) {
          fault(out, path, "type entries must be strings");
          return;
        }
        allowed.push_back(t.get<std::string>());
      }
    } else {
      fault(out, path, "type must be a string or an array of strings");
      return;
    }
    std::string listed;
    for (const auto& t : allowed) {
      if (!known_type(t)) {
        fault(out, path, "unknown type \"" + t + "\"");
        return;
      }
      if (matches_type(doc, t)) return;
      listed += (listed.empty() ? "" : " or ") + t;
    }
    out.push_back({path, "expected type " + listed + ", got " + type_name(doc)});
  }

  void check_enum_const(const json& schema, const json& doc, const std::string& path,
                        std::vector<issue>& out) {
    // nlohmann's operator== compares numbers by value across integer and float, which is what
    // JSON Schema equality requires (1 == 1.0).
    if (const auto it = schema.find("enum"); it != schema.end()) {
      if (!it->is_array()) {
        fault(out, path, "enum must be an array");
      } else {
        bool found = false;
        for (const auto& candidate : *it)
          if (candidate == doc) found = true;
        if (!found)
          out.push_back({path, "value " + short_dump(doc) + " is not one of " + short_dump(*it)});
      }
    }
    if (const auto it = schema.find("const"); it != schema.end() && *it != doc)
      out.push_back({path, "value " + short_dump(doc) + " is not the constant " + short_dump(*it)});
  }

  // Reads a numeric keyword; returns false (after reporting) when present but not a number.
  static bool number_keyword(const json& schema, const char* name, const std::string& path,
                             std::vector<issue>& out, double& value) {
    const auto it = schema.find(name);
    if (it == schema.end()) return false;
    if (!it->is_number()) {
      fault(out, path, std::string(name) + " must be a number");
      return false;
    }
    value = it->get<double>();
    return true;
  }

  void check_numeric(const json& schema, const json& doc, const std::string& path,
                     std::vector<issue>& out) {
    const bool applies = doc.is_number();
    const double x = applies ? doc.get<double>() : 0.0;
    const std::string shown = applies ? doc.dump() : "";
    double bound = 0.0;
    if (number_keyword(schema, "minimum", path, out, bound) && applies && x < bound)
      out.push_back({path, shown + " is less than minimum " + schema.at("minimum").dump()});
    if (number_keyword(schema, "maximum", path, out, bound) && applies && x > bound)
      out.push_back({path, shown + " is greater than maximum " + schema.at("maximum").dump()});
    if (number_keyword(schema, "exclusiveMinimum", path, out, bound) && applies && x <= bound)
      out.push_back({path, shown + " is not greater than exclusiveMinimum " +
                               schema.at("exclusiveMinimum").dump()});
    if (number_keyword(schema, "exclusiveMaximum", path, out, bound) && applies && x >= bound)
      out.push_back({path, shown + " is not less than exclusiveMaximum " +
                               schema.at("exclusiveMaximum").dump()});
  }

  // Reads a count keyword (minLength, minItems, ...); returns false when absent or malformed.
  static bool count_keyword(const json& schema, const char* name, const std::string& path,
                            std::vector<issue>& out, std::size_t& value) {
    const auto it = schema.find(name);
    if (it == schema.end()) return false;
    if (!is_integral(*it) || it->get<double>() < 0) {
      fault(out, path, std::string(name) + " must be a non-negative integer");
      return false;
    }
    value = static_cast<std::size_t>(it->get<double>());
    return true;
  }

  void check_string(const json& schema, const json& doc, const std::string& path,
                    std::vector<issue>& out) {
    const bool applies = doc.is_string();
    const std::size_t length = applies ? code_points(doc.get_ref<const std::string&>()) : 0;
    std::size_t limit = 0;
    if (count_keyword(schema, "minLength", path, out, limit) && applies && length < limit)
      out.push_back({path, "string length " + std::to_string(length) + " is less than minLength " +
                               std::to_string(limit)});
    if (count_keyword(schema, "maxLength", path, out, limit) && applies && length > limit)
      out.push_back({path, "string length " + std::to_string(length) +
                               " is greater than maxLength " + std::to_string(limit)});
    const auto it = schema.find("pattern");
    if (it == schema.end()) return;
    if (!it->is_string()) {
      fault(out, path, "pattern must be a string");
      return;
    }
    const std::regex* re = compiled(it->get_ref<const std::string&>(), path, out);
    if (re == nullptr || !applies) return;
    // JSON Schema patterns are unanchored, hence regex_search rather than regex_match.
    const auto& text = doc.get_ref<const std::string&>();
    if (text.size() > max_pattern_subject) {
      out.push_back({path, "string of " + std::to_string(text.size()) +
                               " characters is longer than the " +
                               std::to_string(max_pattern_subject) + " a pattern is checked on"});
      return;
    }
    if (!bounded_search(text, *re))
      out.push_back({path, "string " + short_dump(doc) + " does not match pattern " + it->dump()});
  }

  // Compiling a std::regex is slow, and the same pattern is applied to every record.
  const std::regex* compiled(const std::string& pattern, const std::string& path,
                             std::vector<issue>& out) {
    auto it = regex_cache_.find(pattern);
    if (it == regex_cache_.end()) {
      std::optional<std::regex> re;
      try {
        re.emplace(pattern, std::regex::ECMAScript);
      } catch (const std::regex_error&) {
      }
      it = regex_cache_.emplace(pattern, std::move(re)).first;
    }
    if (!it->second) {
      fault(out, path, "pattern is not a valid ECMAScript regex: " + pattern);
      return nullptr;
    }
    return &*it->second;
  }

  void check_array(const json& schema, const json& doc, const std::string& path,
                   std::vector<issue>& out, int depth) {
    const bool applies = doc.is_array();
    std::size_t limit = 0;
    if (count_keyword(schema, "minItems", path, out, limit) && applies && doc.size() < limit)
      out.push_back({path, "array has " + std::to_string(doc.size()) +
                               " items, fewer than minItems " + std::to_string(limit)});
    if (count_keyword(schema, "maxItems", path, out, limit) && applies && doc.size() > limit)
      out.push_back({path, "array has " + std::to_string(doc.size()) +
                               " items, more than maxItems " + std::to_string(limit)});

    // prefixItems constrains positions; items covers whatever follows them. An array-valued
    // items is the pre-2020 spelling of prefixItems and is accepted as such.
    const json* prefix = nullptr;
    const json* rest = nullptr;
    if (const auto it = schema.find("prefixItems"); it != schema.end()) {
      if (it->is_array())
        prefix = &*it;
      else
        fault(out, path, "prefixItems must be an array of schemas");
    }
    if (const auto it = schema.find("items"); it != schema.end()) {
      if (it->is_array() && prefix == nullptr)
        prefix = &*it;
      else if (it->is_array())
        fault(out, path, "items must be a schema when prefixItems is set");
      else
        rest = &*it;
    }
    if (!applies) return;
    const std::size_t n_prefix = prefix != nullptr ? prefix->size() : 0;
    for (std::size_t i = 0; i < doc.size(); ++i) {
      if (i < n_prefix)
        check((*prefix)[i], doc[i], child_path(path, i), out, depth + 1);
      else if (rest != nullptr)
        check(*rest, doc[i], child_path(path, i), out, depth + 1);
    }
  }

  void check_object(const json& schema, const json& doc, const std::string& path,
                    std::vector<issue>& out, int depth) {
    const bool applies = doc.is_object();
    if (const auto it = schema.find("required"); it != schema.end()) {
      if (!it->is_array()) {
        fault(out, path, "required must be an array of strings");
      } else {
        for (const auto& name : *it) {
          if (!name.is_string())
            fault(out, path, "required entries must be strings");
          else if (applies && !doc.contains(name.get_ref<const std::string&>()))
            out.push_back({path, "missing required property \"" + name.get<std::string>() + "\""});
        }
      }
    }

    const json* properties = nullptr;
    if (const auto it = schema.find("properties"); it != schema.end()) {
      if (it->is_object())
        properties = &*it;
      else
        fault(out, path, "properties must be an object");
    }
    const json* patterns = nullptr;
    if (const auto it = schema.find("patternProperties"); it != schema.end()) {
      if (it->is_object())
        patterns = &*it;
      else
        fault(out, path, "patternProperties must be an object");
    }
    const auto additional = schema.find("additionalProperties");
    if (!applies) {
      // Still validate the keyword's own shape so a broken schema is noticed on any document.
      if (additional != schema.end() && !additional->is_boolean() && !additional->is_object())
        fault(out, path, "additionalProperties must be a schema");
      return;
    }

    for (const auto& [key, value] : doc.items()) {
      const std::string where = child_path(path, key);
      bool covered = false;
      if (properties != nullptr) {
        if (const auto p = properties->find(key); p != properties->end()) {
          covered = true;
          check(*p, value, where, out, depth + 1);
        }
      }
      if (patterns != nullptr) {
        for (const auto& [pattern, subschema] : patterns->items()) {
          const std::regex* re = compiled(pattern, path, out);
          if (re != nullptr && key.size() <= max_pattern_subject && bounded_search(key, *re)) {
            covered = true;
            check(subschema, value, where, out, depth + 1);
          }
        }
      }
      if (covered || additional == schema.end()) continue;
      if (additional->is_boolean() && !additional->get<bool>())
        out.push_back({where, "additional property \"" + key + "\" is not allowed"});
      else
        check(*additional, value, where, out, depth + 1);
    }
  }

  // Returns the keyword's subschema list, or nullptr (after reporting) when malformed.
  static const json* schema_list(const json& schema, const char* name, const std::string& path,
                                 std::vector<issue>& out) {
    const auto it = schema.find(name);
    if (it == schema.end()) return nullptr;
    if (!it->is_array() || it->empty()) {
      fault(out, path, std::string(name) + " must be a non-empty array of schemas");
      return nullptr;
    }
    return &*it;
  }

  void check_combinators(const json& schema, const json& doc, const std::string& path,
                         std::vector<issue>& out, int depth) {
    if (const json* all = schema_list(schema, "allOf", path, out))
      for (const auto& s : *all)
        check(s, doc, path, out, depth + 1);

    if (const json* any = schema_list(schema, "anyOf", path, out)) {
      bool matched = false;
      // No short-circuit: every branch is evaluated so schema faults in any of them surface.
      for (const auto& s : *any)
        matched = passes(s, doc, path, out, depth) || matched;
      if (!matched)
        out.push_back({path, "value matches none of the " + std::to_string(any->size()) +
                                 " schemas in anyOf"});
    }

    if (const json* one = schema_list(schema, "oneOf", path, out)) {
      std::string matched;
      std::size_t count = 0;
      for (std::size_t i = 0; i < one->size(); ++i) {
        if (!passes((*one)[i], doc, path, out, depth)) continue;
        ++count;
        matched += (matched.empty() ? "" : ", ") + std::to_string(i);
      }
      if (count == 0)
        out.push_back({path, "value matches none of the " + std::to_string(one->size()) +
                                 " schemas in oneOf"});
      else if (count > 1)
        out.push_back({path, "value matches " + std::to_string(count) +
                                 " schemas in oneOf (indices " + matched +
                                 "), expected exactly one"});
    }

    if (const auto it = schema.find("not");
        it != schema.end() && passes(*it, doc, path, out, depth))
      out.push_back({path, "value must not match the schema in \"not\""});

    if (const auto it = schema.find("if"); it != schema.end()) {
      const bool condition = passes(*it, doc, path, out, depth);
      const auto branch = schema.find(condition ? "then" : "else");
      if (branch != schema.end()) check(*branch, doc, path, out, depth + 1);
    }
  }

  const json& root_;
  std::map<std::string, std::optional<std::regex>> regex_cache_;
};

// The keywords check() implements, and those it may ignore: annotations (title, format, ...),
// containers of subschemas ($defs, definitions) and a root $id, which change no verdict. Any
// other keyword makes the schema invalid: a validator that skipped it would accept documents
// the schema's author meant to refuse.
constexpr std::string_view implemented[] = {"type",
                                            "enum",
                                            "const",
                                            "properties",
                                            "patternProperties",
                                            "required",
                                            "additionalProperties",
                                            "items",
                                            "prefixItems",
                                            "minItems",
                                            "maxItems",
                                            "minimum",
                                            "maximum",
                                            "exclusiveMinimum",
                                            "exclusiveMaximum",
                                            "minLength",
                                            "maxLength",
                                            "pattern",
                                            "allOf",
                                            "anyOf",
                                            "oneOf",
                                            "not",
                                            "if",
                                            "then",
                                            "else",
                                            "$ref"};

bool implemented_keyword(std::string_view k) {
  for (const auto x : implemented)
    if (x == k) return true;
  return false;
}

bool ignored_keyword(std::string_view k) {
  static constexpr std::string_view ignored[] = {
      "$schema",          "$comment",       "$defs",      "definitions", "title",     "description",
      "default",          "examples",       "deprecated", "readOnly",    "writeOnly", "format",
      "contentMediaType", "contentEncoding"};
  for (const auto x : ignored)
    if (x == k) return true;
  return false;
}

// Walks every subschema reachable through a keyword (visited or not by a given document) and
// reports each keyword neither implemented nor ignorable, with the schema pointer it sits at.
void unsupported_keywords(const json& schema, const std::string& at, bool root,
                          std::vector<issue>& out, int depth) {
  if (!schema.is_object() || depth > max_depth) return;
  for (const auto& [k, v] : schema.items()) {
    const std::string here = child_path(at, k);
    if (k == "$id" && root) continue;
    if (!implemented_keyword(k) && !ignored_keyword(k)) {
      out.push_back({"",
                     "invalid schema: keyword \"" + k + "\" at #" + at +
                         " is not implemented (supported: see reports/json_schema.h)",
                     true});
      continue;
    }
    if (k == "properties" || k == "patternProperties" || k == "$defs" || k == "definitions") {
      if (v.is_object())
        for (const auto& [name, sub] : v.items())
          unsupported_keywords(sub, child_path(here, name), false, out, depth + 1);
    } else if (k == "items" || k == "prefixItems" || k == "allOf" || k == "anyOf" || k == "oneOf") {
      if (v.is_array())
        for (std::size_t i = 0; i < v.size(); ++i)
          unsupported_keywords(v[i], child_path(here, i), false, out, depth + 1);
      else
        unsupported_keywords(v, here, false, out, depth + 1);
    } else if (k == "additionalProperties" || k == "not" || k == "if" || k == "then" ||
               k == "else") {
      unsupported_keywords(v, here, false, out, depth + 1);
    }
  }
}

} // namespace

std::span<const std::string_view> implemented_schema_keywords() {
  return implemented;
}

std::vector<schema_error> validate_json(const nlohmann::json& schema,
                                        const nlohmann::json& document) {
  validator v(schema);
  std::vector<issue> found;
  unsupported_keywords(schema, "", true, found, 0);
  try {
    if (found.empty()) v.check(schema, document, "", found, 0);
  } catch (const std::exception& e) {
    // Last line of defence (e.g. std::regex running out of stack budget on a huge string): report
    // rather than let a validation call take the tool down.
    found.push_back({"", std::string("validation aborted: ") + e.what(), true});
  }
  std::vector<schema_error> errors;
  errors.reserve(found.size());
  for (auto& e : found)
    errors.push_back({std::move(e.path), std::move(e.message)});
  return errors;
}

} // namespace kg
