#include "suite/task_catalog.h"

#include <algorithm>
#include <fstream>
#include <set>

#include <glob.h>

#include "reports/json_input.h"
#include "reports/json_schema.h"

namespace kg {
namespace {

constexpr std::uint64_t max_dim = std::uint64_t{1} << 40;

[[noreturn]] void fail(const std::filesystem::path& f, const std::string& field,
                       const std::string& why) {
  throw task_error(printable(f.string()) + ": " + printable(field) + ": " + printable(why, 400));
}

task_tensor parse_tensor(const nlohmann::json& j) {
  task_tensor t;
  t.name = j.at("name").get<std::string>();
  t.type = *parse_dtype(j.at("dtype").get<std::string>()); // the schema allowed only known names
  t.role = j.value("role", std::string("activation"));
  t.upper = j.value("upper", std::string());
  t.shape = j.at("shape").get<std::vector<std::string>>();
  return t;
}

// Draw 0 of every shape is the normal regime, checked with the task's own tolerance; a regime's
// own tolerance must name a dtype some output has, or it would silently never apply.
void check_regimes(const std::filesystem::path& f, const task_def& t) {
  if (t.regimes.empty() || t.regimes.front().kind != regime_kind::normal)
    fail(f, "/regimes/0",
         "the first regime must be 'normal' (draw 0 of every shape is the normal regime)");
  for (std::size_t k = 0; k < t.regimes.size(); ++k)
    for (const auto& [type, tol] : t.regimes[k].tolerance) {
      const std::string field = "/regimes/" + std::to_string(k) + "/tolerance";
      if (k == 0) fail(f, field, "the normal regime is checked with the task's own tolerance");
      if (std::none_of(t.outputs.begin(), t.outputs.end(),
                       [type = type](const task_tensor& o) { return o.type == type; }))
        fail(f, field, "no output is " + std::string(dtype_name(type)));
    }
}

} // namespace

task_def load_task(const std::filesystem::path& file) {
  nlohmann::json j;
  try {
    j = read_json_file_checked(file);
  } catch (const json_input_error& e) {
    throw task_error(e.what());
  }
  static const nlohmann::json schema = nlohmann::json::parse(task_schema_text());
  if (const auto errors = validate_json(schema, j); !errors.empty())
    fail(file, errors.front().path.empty() ? "/" : errors.front().path, errors.front().message);

  task_def t;
  t.file = file.string();
  t.id = j.at("id").get<std::string>();
  t.title = j.at("title").get<std::string>();
  t.kind = j.at("kind").get<std::string>();
  t.op = j.at("op").get<std::string>();
  t.reference = j.at("reference").get<std::string>();
  t.params = j.value("params", nlohmann::json::object());
  t.flops = j.at("flops").get<std::string>();
  t.min_bytes = j.at("min_bytes").get<std::string>();
  t.library_calls_allowed = j.at("library_calls") == "allowed";
  for (const auto& x : j.at("inputs"))
    t.inputs.push_back(parse_tensor(x));
  for (const auto& x : j.at("outputs"))
    t.outputs.push_back(parse_tensor(x));
  for (std::size_t k = 0; k < j.at("shapes").size(); ++k) {
    const auto& s = j["shapes"][k];
    task_shape shape{s.at("name").get<std::string>(), {}};
    for (const auto& [name, v] : s.at("dims").items()) {
      // Whole numbers a tensor can have: a value past 2^40 elements a dimension is a mistake,
      // and one past 2^63 would wrap negative.
      if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<std::uint64_t>() > max_dim) ||
          v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > static_cast<std::int64_t>(max_dim))
        fail(file, "/shapes/" + std::to_string(k) + "/dims/" + name,
             "must be a whole number from 1 to 2^40");
      shape.dims[name] = v.get<std::int64_t>();
    }
    t.shapes.push_back(std::move(shape));
  }
  for (const auto& [k, v] : j.at("tolerance").items())
    t.tolerance[*parse_dtype(k)] = {v.at("atol").get<double>(), v.at("rtol").get<double>()};
  if (j.contains("regimes")) {
    t.regimes.clear();
    const auto& list = j.at("regimes");
    for (std::size_t k = 0; k < list.size(); ++k) {
      try {
        t.regimes.push_back(parse_regime(list.at(k)));
      } catch (const std::invalid_argument& e) {
        fail(file, "/regimes/" + std::to_string(k), e.what());
      }
    }
  }

  if (t.id != file.stem().string())
    fail(file, "/id", "'" + t.id + "' differs from the file name '" + file.stem().string() + "'");
  std::set<std::string> names;
  for (const auto* list : {&t.inputs, &t.outputs})
    for (std::size_t k = 0; k < list->size(); ++k) {
      const auto& x = (*list)[k];
      const std::string field =
          std::string(list == &t.inputs ? "/inputs/" : "/outputs/") + std::to_string(k);
      if (!names.insert(x.name).second) fail(file, field + "/name", "'" + x.name + "' repeats");
      if (list == &t.inputs && x.role == "indices" && x.upper.empty())
        fail(file, field + "/upper", "an indices input needs an exclusive upper bound");
      if (list == &t.inputs && x.role == "indices" && x.type != dtype::int32 &&
          x.type != dtype::int64)
        fail(file, field + "/dtype", "indices must be int32 or int64");
    }
  for (const auto& o : t.outputs)
    if (is_floating(o.type) && !t.tolerance.count(o.type))
      fail(file, "/tolerance", "no tolerance for output dtype " + std::string(dtype_name(o.type)));
  check_regimes(file, t);
  bool odd = false;
  for (std::size_t k = 0; k < t.shapes.size(); ++k) {
    const auto& s = t.shapes[k];
    const std::string field = "/shapes/" + std::to_string(k);
    for (const auto* list : {&t.inputs, &t.outputs})
      for (const auto& x : *list) {
        for (const auto& d : x.shape)
          try {
            (void)resolve_dim(d, s);
          } catch (const std::invalid_argument& e) {
            fail(file, field, x.name + ": " + e.what());
          }
        if (!x.upper.empty()) try {
            (void)resolve_dim(x.upper, s);
          } catch (const std::invalid_argument& e) {
            fail(file, field, x.name + ".upper: " + e.what());
          }
      }
    for (const auto* e : {&t.flops, &t.min_bytes})
      try {
        if (eval_dim_expr(*e, s.dims) < 0) fail(file, field, "'" + *e + "' is negative");
        // (eval_dim_expr refuses values that are not finite)
      } catch (const std::invalid_argument& ex) {
        fail(file, e == &t.flops ? "/flops" : "/min_bytes", ex.what());
      }
    for (const auto& [name, v] : s.dims)
      odd = odd || (v > 1 && v % 2 == 1);
  }
  if (!odd)
    fail(file, "/shapes", "no shape has an odd dimension: one must cross tile and tail boundaries");
  return t;
}

std::vector<std::filesystem::path> expand_glob(const std::string& pattern) {
  namespace fs = std::filesystem;
  std::vector<fs::path> out;
  std::error_code ec;
  if (fs::is_directory(pattern, ec)) {
    for (const auto& e : fs::directory_iterator(pattern))
      if (e.path().extension() == ".json") out.push_back(e.path());
  } else {
    glob_t g{};
    if (::glob(pattern.c_str(), 0, nullptr, &g) == 0)
      for (std::size_t k = 0; k < g.gl_pathc; ++k)
        out.emplace_back(g.gl_pathv[k]);
    globfree(&g);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<task_def> load_tasks(const std::string& pattern) {
  const auto files = expand_glob(pattern);
  if (files.empty()) throw task_error(pattern + ": no task files match");
  std::vector<task_def> out;
  std::set<std::string> ids;
  for (const auto& f : files) {
    out.push_back(load_task(f));
    if (!ids.insert(out.back().id).second) fail(f, "/id", "'" + out.back().id + "' repeats");
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.id < b.id; });
  return out;
}

} // namespace kg
