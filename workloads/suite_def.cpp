#include "workloads/suite_def.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <system_error>

#include "base/printable.h"
#include "workloads/qwen3.h"

namespace kg {
namespace fs = std::filesystem;

namespace {

// Suite files nest five deep and weigh a few hundred kB; the limits keep a hostile file from
// reaching the recursive walks that follow (the schema validator, error messages).
constexpr int max_depth = 64;
constexpr std::uintmax_t max_bytes = std::uintmax_t{64} << 20;

[[noreturn]] void fail(const fs::path& file, const std::string& pointer, const std::string& why) {
  throw suite_error(printable(file.string(), 300) + ": " +
                    (pointer.empty() ? "" : printable(pointer, 200) + ": ") + printable(why, 400));
}

std::string in_quotes(std::string_view s) {
  std::string q(1, '\'');
  q += printable(s, 120);
  return q + '\'';
}

nlohmann::json parse_suite_text(const std::string& text, const fs::path& file) {
  const auto limit_depth = [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > max_depth)
      fail(file, "", "nests arrays and objects more than " + std::to_string(max_depth) + " deep");
    return true;
  };
  try {
    return nlohmann::json::parse(text, limit_depth);
  } catch (const nlohmann::json::parse_error& e) {
    fail(file, "", std::string("malformed JSON: ") + e.what()); // says "at line L, column C"
  } catch (const nlohmann::json::exception& e) {
    fail(file, "", std::string("unusable JSON: ") + e.what());
  }
}

nlohmann::json read_suite_json(const fs::path& file) {
  std::error_code ec;
  const auto status = fs::status(file, ec);
  if (ec || !fs::exists(status)) fail(file, "", "no such file");
  if (!fs::is_regular_file(status)) fail(file, "", "not a regular file");
  if (const auto size = fs::file_size(file, ec); !ec && size > max_bytes)
    fail(file, "", std::to_string(size) + " bytes, more than a suite file may have");
  std::ifstream in(file, std::ios::binary);
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (!in.good() && !in.eof()) fail(file, "", "cannot read it");
  return parse_suite_text(text, file);
}

nlohmann::json read_validated(const fs::path& file, const suite_validator& validate) {
  auto doc = read_suite_json(file);
  if (!validate) return doc;
  const auto errors = validate(doc);
  if (errors.empty()) return doc;
  const std::string more =
      errors.size() > 1 ? " (and " + std::to_string(errors.size() - 1) + " more)" : "";
  fail(file, "", "not a kernelgate.suite/1 file: " + errors.front() + more);
}

suite_workload parse_workload(const nlohmann::json& j) {
  suite_workload w;
  w.id = j.at("id").get<std::string>();
  w.level = j.at("level").get<std::string>();
  w.kind = j.at("kind").get<std::string>();
  w.description = j.at("description").get<std::string>();
  w.setup = j.at("setup").get<std::string>();
  w.params = j.at("params");
  const auto& m = j.at("metric");
  w.metric = {m.at("name").get<std::string>(), m.at("direction").get<std::string>(),
              m.at("unit").get<std::string>()};
  if (const auto& s = j.at("sol"); !s.is_null())
    w.sol = suite_sol{s.at("bound").get<std::string>(), s.at("ceiling").get<std::string>(),
                      s.at("note").get<std::string>(), s.at("quantity").get<double>()};
  w.gates = j.at("gates").get<std::vector<std::string>>();
  w.roles = j.at("roles").get<std::map<std::string, std::string>>();
  w.cost_seconds = j.at("cost_seconds").get<double>();
  return w;
}

// Where a workload's problems are reported: its file and JSON pointer.
struct site {
  const fs::path& file;
  std::string pointer;
};

void require(bool ok, const site& at, const std::string& field, const std::string& why) {
  if (!ok) fail(at.file, at.pointer + field, why);
}

std::int64_t param(const suite_workload& w, const char* key) {
  return w.params.at(key).get<std::int64_t>();
}

std::string shape_text(std::initializer_list<std::int64_t> dims) {
  std::string s;
  for (auto d : dims) {
    if (!s.empty()) s += 'x';
    s += std::to_string(d);
  }
  return s;
}

decode_gemm projection_gemm(const std::string& projection, const site& at) {
  for (const auto& g : decode_gemms())
    if (g.name == projection) return g;
  fail(at.file, at.pointer + "/params/projection", "no decode GEMV " + in_quotes(projection));
}

// (m, n, k) of a LoRA training GEMM C[m, n] = A[m, k] B[k, n] (q and v adapters of Qwen3-4B).
std::optional<std::array<std::int64_t, 3>> lora_gemm_shape(const std::string& op, std::int64_t seq,
                                                           std::int64_t rank) {
  const qwen3_config c;
  const std::int64_t q = c.q_heads * c.head_dim, v = c.kv_heads * c.head_dim;
  if (op == "q_base_fwd") return {{seq, q, c.hidden}};
  if (op == "v_base_fwd") return {{seq, v, c.hidden}};
  if (op == "lora_a_fwd") return {{seq, rank, c.hidden}};
  if (op == "lora_b_fwd") return {{seq, q, rank}};
  if (op == "lora_a_grad") return {{rank, c.hidden, seq}};
  if (op == "lora_b_grad") return {{q, rank, seq}};
  return std::nullopt;
}

void check_width(const suite_workload& w, const site& at, const char* key, std::int64_t model,
                 const char* what) {
  const auto got = param(w, key);
  require(got == model, at, std::string("/params/") + key,
          w.kind + " " + key + " " + std::to_string(got) + " is not Qwen3-4B's " + what + " " +
              std::to_string(model));
}

// The kernel workloads' shapes are the model's: a suite times Qwen3-4B's kernels, not others.
void check_kernel_shape(const suite_workload& w, const site& at) {
  const qwen3_config c;
  if (w.kind == "gemv") {
    const auto g = projection_gemm(w.params.at("projection").get<std::string>(), at);
    const auto n = param(w, "n"), k = param(w, "k");
    require(n == g.n && k == g.k, at, "/params",
            "gemv " + in_quotes(g.name) + " is " + shape_text({g.n, g.k}) + " in Qwen3-4B, not " +
                shape_text({n, k}));
  } else if (w.kind == "attention") {
    check_width(w, at, "q_heads", c.q_heads, "q heads");
    check_width(w, at, "kv_heads", c.kv_heads, "kv heads");
    check_width(w, at, "head_dim", c.head_dim, "head_dim");
  } else if (w.kind == "rmsnorm" || w.kind == "add_rmsnorm" || w.kind == "embedding") {
    check_width(w, at, "cols", c.hidden, "hidden size");
  } else if (w.kind == "silu_mul") {
    check_width(w, at, "inter", c.intermediate, "intermediate size");
  } else if (w.kind == "argmax") {
    check_width(w, at, "cols", c.vocab, "vocabulary");
  } else if (w.kind == "lora_gemm") {
    const auto op = w.params.at("op").get<std::string>();
    const auto want = lora_gemm_shape(op, param(w, "seq"), param(w, "rank"));
    require(want.has_value(), at, "/params/op", "no LoRA GEMM " + in_quotes(op));
    const auto m = param(w, "m"), n = param(w, "n"), k = param(w, "k");
    const auto& [wm, wn, wk] = *want;
    require(m == wm && n == wn && k == wk, at, "/params",
            "lora_gemm " + in_quotes(op) + " at this seq and rank is " + shape_text({wm, wn, wk}) +
                " (m x n x k), not " + shape_text({m, n, k}));
  }
}

std::string tenant_setup(const std::string& tenant) {
  if (tenant == "solo") return "engine.whole";
  if (tenant == "partition") return "engine.partition.idle";
  return "engine.partition." + tenant; // hog, lora1, lora4, lora16
}

// The set-up a workload's placement or tenant needs ("" when none exists).
std::string needed_setup(const suite_workload& w) {
  if (w.level == "kernel") return "kernels";
  if (w.kind == "decode_step")
    return w.params.at("placement") == "solo" ? "engine.whole" : "engine.partition.lora1";
  if (w.kind == "serving_throughput" || w.kind == "serving_p99")
    return tenant_setup(w.params.at("tenant").get<std::string>());
  if (w.kind == "lora_training") {
    if (w.params.at("placement") == "solo") return "training.whole";
    const auto jobs = param(w, "jobs");
    if (jobs == 1 || jobs == 4 || jobs == 16) return "engine.partition.lora" + std::to_string(jobs);
    return "";
  }
  return w.setup;
}

void check_setup(const suite_workload& w, const site& at) {
  const std::string want = needed_setup(w);
  if (want.empty())
    fail(at.file, at.pointer + "/params/jobs",
         "no partition set-up runs " + std::to_string(param(w, "jobs")) +
             " training jobs beside decode (1, 4 or 16)");
  require(w.setup == want, at, "/setup",
          in_quotes(w.setup) + " does not run this " + w.kind + "'s parameters (" +
              in_quotes(want) + " does)");
}

// The bounds that workloads/qwen3.h computes must be its figures, so the SOL fractions of the
// suite and of `kernelgate workload run` agree.
void check_sol(const suite_workload& w, const site& at) {
  std::optional<double> bytes;
  if (w.kind == "gemv")
    bytes = gemm_roofline(projection_gemm(w.params.at("projection").get<std::string>(), at),
                          param(w, "batch"))
                .bytes;
  else if (w.kind == "attention")
    bytes = attention_roofline(param(w, "batch"), param(w, "context")).bytes;
  else if (w.kind == "decode_step")
    bytes = decode_step_roofline(param(w, "batch"), param(w, "context")).bytes;
  if (!bytes) return;
  require(w.sol && w.sol->bound == "bytes", at, "/sol",
          "a " + w.kind + " is bounded by the bytes it moves (workloads/qwen3.h)");
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.17g is not workloads/qwen3.h's %.17g bytes", w.sol->quantity,
                *bytes);
  require(w.sol->quantity == *bytes, at, "/sol/quantity", buf);
}

std::vector<suite_workload> parse_workloads(const fs::path& file, const nlohmann::json& doc) {
  std::vector<suite_workload> out;
  std::map<std::string, std::size_t> seen;
  const auto& list = doc.at("workloads");
  for (std::size_t k = 0; k < list.size(); ++k) {
    const site at{file, "/workloads/" + std::to_string(k)};
    try {
      out.push_back(parse_workload(list.at(k)));
      const auto& w = out.back();
      if (const auto [it, fresh] = seen.emplace(w.id, k); !fresh)
        fail(file, at.pointer + "/id",
             "duplicate workload id " + in_quotes(w.id) + " (also /workloads/" +
                 std::to_string(it->second) + ")");
      check_kernel_shape(w, at);
      check_setup(w, at);
      check_sol(w, at);
    } catch (const nlohmann::json::exception& e) { // a file no validator has seen
      fail(file, at.pointer, std::string("unusable workload: ") + e.what());
    }
  }
  return out;
}

std::vector<suite_workload> select_workloads(const fs::path& file, const nlohmann::json& select,
                                             const fs::path& base,
                                             const std::vector<suite_workload>& all) {
  std::map<std::string, const suite_workload*> by_id;
  for (const auto& w : all)
    by_id[w.id] = &w;
  std::vector<suite_workload> out;
  std::set<std::string> taken;
  for (std::size_t k = 0; k < select.size(); ++k) {
    const std::string pointer = "/select/" + std::to_string(k);
    const auto id = select.at(k).get<std::string>();
    const auto it = by_id.find(id);
    if (it == by_id.end())
      fail(file, pointer,
           "unknown workload id " + in_quotes(id) + " in " + file.filename().string() + " (" +
               base.filename().string() + " has no such workload)");
    if (!taken.insert(id).second) fail(file, pointer, in_quotes(id) + " is selected twice");
    out.push_back(*it->second);
  }
  return out;
}

bool bare_name(const std::string& s) {
  if (s.empty() || s.size() > 64 || s.front() == '-' || s.front() == '_') return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// The digit run at s[k...] without leading zeros; advances k past it.
std::string_view digit_run(std::string_view s, std::size_t& k) {
  const std::size_t start = k;
  while (k < s.size() && is_digit(s[k]))
    ++k;
  const auto run = s.substr(start, k - start);
  const auto first = run.find_first_not_of('0');
  return first == std::string_view::npos ? std::string_view{} : run.substr(first);
}

std::string si(double v, const char* unit) {
  static const char* prefix[] = {"", "k", "M", "G", "T", "P"};
  int p = 0;
  while (v >= 1000 && p < 5) {
    v /= 1000;
    ++p;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g %s%s", v, prefix[p], unit);
  return buf;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// A whole quantity stays an integer in JSON, as the suite files write it.
nlohmann::json quantity_json(double v) {
  if (std::floor(v) == v && std::fabs(v) < 9e15) return static_cast<std::int64_t>(v);
  return v;
}

std::string md_cell(std::string s) {
  for (std::size_t i = 0; (i = s.find('|', i)) != std::string::npos; i += 2)
    s.replace(i, 1, "\\|");
  return s;
}

std::string joined(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words)
    s += (s.empty() ? "" : ", ") + w;
  return s;
}

} // namespace

fs::path resolve_suite_file(const std::string& name_or_file, const fs::path& suites_dir) {
  if (!bare_name(name_or_file)) return name_or_file;
  const fs::path file = suites_dir / (name_or_file + ".json");
  std::error_code ec;
  if (!fs::exists(file, ec)) {
    const auto names = suite_names(suites_dir);
    throw suite_error("unknown suite " + in_quotes(name_or_file) + " (" +
                      printable(suites_dir.string(), 200) + " has " +
                      (names.empty() ? "none" : joined(names)) + "; or give a suite file's path)");
  }
  return file;
}

std::vector<std::string> suite_names(const fs::path& suites_dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(suites_dir, ec))
    if (e.path().extension() == ".json" && bare_name(e.path().stem().string()))
      names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

suite_def load_suite(const std::string& name_or_file, const fs::path& suites_dir,
                     const suite_validator& validate) {
  const fs::path file = resolve_suite_file(name_or_file, suites_dir);
  const auto doc = read_validated(file, validate);
  suite_def s;
  s.source_file = file.string();
  s.files = {file.string()};
  try {
    s.name = doc.at("name").get<std::string>();
    s.description = doc.at("description").get<std::string>();
    if (doc.contains("base") == doc.contains("workloads"))
      fail(file, "", "a suite has either workloads, or a base and a select");
    if (!doc.contains("base")) {
      s.workloads = parse_workloads(file, doc);
      return s;
    }
    const auto base_name = doc.at("base").get<std::string>();
    const fs::path base = file.parent_path() / base_name;
    std::error_code ec;
    if (!fs::is_regular_file(base, ec))
      fail(file, "/base", in_quotes(base_name) + ": no such file (" + base.string() + ")");
    const auto base_doc = read_validated(base, validate);
    if (base_doc.contains("base"))
      fail(file, "/base",
           in_quotes(base_name) +
               " itself has a base (a base lists its workloads: one level only)");
    s.files.push_back(base.string());
    s.workloads = select_workloads(file, doc.at("select"), base, parse_workloads(base, base_doc));
  } catch (const nlohmann::json::exception& e) { // a file no validator has seen
    fail(file, "", std::string("unusable suite: ") + e.what());
  }
  return s;
}

std::vector<suite_workload> filter_workloads(std::vector<suite_workload> w,
                                             const std::string& regex) {
  std::regex re;
  try {
    re = std::regex(regex, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw suite_error("bad workload filter " + in_quotes(regex) + ": " + e.what());
  }
  std::erase_if(w, [&](const suite_workload& x) { return !std::regex_search(x.id, re); });
  return w;
}

const std::vector<std::string>& suite_setup_order() {
  static const std::vector<std::string> order = {"kernels",
                                                 "engine.whole",
                                                 "engine.partition.idle",
                                                 "engine.partition.hog",
                                                 "engine.partition.lora1",
                                                 "engine.partition.lora4",
                                                 "engine.partition.lora16",
                                                 "training.whole"};
  return order;
}

std::size_t setup_rank(std::string_view setup) {
  const auto& order = suite_setup_order();
  return static_cast<std::size_t>(std::find(order.begin(), order.end(), setup) - order.begin());
}

bool natural_id_less(std::string_view a, std::string_view b) {
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (is_digit(a[i]) && is_digit(b[j])) {
      const auto x = digit_run(a, i), y = digit_run(b, j);
      if (x.size() != y.size()) return x.size() < y.size();
      if (x != y) return x < y;
    } else {
      if (a[i] != b[j]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
      ++i;
      ++j;
    }
  }
  if (i < a.size() || j < b.size()) return i == a.size(); // a prefix comes first
  return a < b;                                           // equal but for leading zeros
}

std::vector<suite_workload> order_for_run(std::vector<suite_workload> w) {
  std::sort(w.begin(), w.end(), [](const suite_workload& a, const suite_workload& b) {
    const auto ra = setup_rank(a.setup), rb = setup_rank(b.setup);
    if (ra != rb) return ra < rb;
    if (a.setup != b.setup) return a.setup < b.setup; // set-ups outside the list, by name
    return natural_id_less(a.id, b.id);
  });
  return w;
}

std::string format_sol_bound(const std::optional<suite_sol>& sol) {
  if (!sol) return "-";
  return si(sol->quantity, sol->bound == "bytes" ? "B" : "FLOP") + " / " + sol->ceiling;
}

double total_cost_seconds(const std::vector<suite_workload>& w) {
  double total = 0;
  for (const auto& x : w)
    total += x.cost_seconds;
  return total;
}

std::string suite_markdown_table(const suite_def& s) {
  std::string out = "| # | id | level | setup | metric | SOL bound | gates | cost s | workload |\n"
                    "|---:|---|---|---|---|---|---|---:|---|\n";
  const auto ordered = order_for_run(s.workloads);
  for (std::size_t k = 0; k < ordered.size(); ++k) {
    const auto& w = ordered[k];
    out += "| " + std::to_string(k + 1) + " | `" + md_cell(w.id) + "` | " + md_cell(w.level) +
           " | " + md_cell(w.setup) + " | " + md_cell(w.metric.name) + " (" +
           md_cell(w.metric.unit) + ", " + md_cell(w.metric.direction) + ") | " +
           md_cell(format_sol_bound(w.sol)) + " | " + md_cell(joined(w.gates)) + " | " +
           number(w.cost_seconds) + " | " + md_cell(w.description) + " |\n";
  }
  const double total = total_cost_seconds(ordered);
  char minutes[32];
  std::snprintf(minutes, sizeof minutes, "%.1f", total / 60);
  return out + "\n" + std::to_string(ordered.size()) + " workloads, about " + number(total) +
         " s (" + minutes + " min) of measurement on one H200 by their cost_seconds, set-up " +
         "excluded.\n";
}

nlohmann::json suite_workload_json(const suite_workload& w) {
  nlohmann::json sol = nullptr;
  if (w.sol)
    sol = {{"bound", w.sol->bound},
           {"quantity", quantity_json(w.sol->quantity)},
           {"ceiling", w.sol->ceiling},
           {"note", w.sol->note}};
  return {{"id", w.id},
          {"level", w.level},
          {"kind", w.kind},
          {"description", w.description},
          {"params", w.params},
          {"metric",
           {{"name", w.metric.name}, {"direction", w.metric.direction}, {"unit", w.metric.unit}}},
          {"sol", sol},
          {"gates", w.gates},
          {"roles", w.roles},
          {"setup", w.setup},
          {"cost_seconds", w.cost_seconds}};
}

nlohmann::json suite_json(const suite_def& s) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& w : s.workloads)
    list.push_back(suite_workload_json(w));
  return {{"schema", "kernelgate.suite/1"},
          {"name", s.name},
          {"description", s.description},
          {"workloads", std::move(list)}};
}

} // namespace kg
