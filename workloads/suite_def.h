// Regression suites as data (data/suites/*.json, schema data/schema/suite.schema.json, id
// "kernelgate.suite/1"; docs/suites.md): a suite lists its workloads, or names a base suite file
// and selects workloads of it by id (smoke.json selects 12 of nightly.json). Each workload has an
// id, a level and kind with the kind's parameters, its primary metric, its speed-of-light bound
// where one exists, its gates, the implementation of every kernel role it runs, the set-up it
// shares with others (the run order groups by it) and an expected cost for the ETA.
//
// The JSON Schema validator lives in reports/, a layer above this one, so load_suite takes the
// validation as a callback; suite/suite_catalog.h's load_suite_validated passes the schema's.
// Every failure is a suite_error whose message is one line naming the file and the problem.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kg {

struct suite_metric {
  std::string name, direction, unit; // direction "lower" | "higher"
};

struct suite_sol {
  std::string bound, ceiling, note; // bound "bytes" | "flops"; ceiling "copy_bandwidth" | ...
  double quantity = 0;              // bytes or FLOPs
};

struct suite_workload {
  std::string id, level, kind, description, setup;
  nlohmann::json params; // as in the file
  suite_metric metric;
  std::optional<suite_sol> sol;
  std::vector<std::string> gates;
  std::map<std::string, std::string> roles; // role -> implementation
  double cost_seconds = 0;
};

struct suite_def {
  std::string name, description, source_file;
  std::vector<std::string> files; // every file read: source_file, then its base if it has one
  std::vector<suite_workload> workloads; // in the file's order (a selection: the select order)
};

struct suite_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// data/schema/suite.schema.json, embedded at configure time.
std::string_view suite_schema_text();

// Checks a parsed suite document against the schema; returns one "POINTER: message" per
// violation (empty: valid).
using suite_validator = std::function<std::vector<std::string>(const nlohmann::json& doc)>;

// A bare name ("nightly", "smoke": lower-case letters, digits, '_' and '-') is the file
// NAME.json of suites_dir; anything else is a file path. Throws suite_error for a name the
// folder lacks ("unknown suite 'x' (...: nightly, smoke)").
std::filesystem::path resolve_suite_file(const std::string& name_or_file,
                                         const std::filesystem::path& suites_dir);
// The bare names of the suites in suites_dir (its *.json files), sorted.
std::vector<std::string> suite_names(const std::filesystem::path& suites_dir);

// Reads the suite (and its base), validates each file with `validate` when given, then checks
// what a schema cannot say: ids unique, every select id known ("unknown workload id 'x' in
// smoke.json"), a base one level deep, parameters that match Qwen3-4B (a gemv projection's n and
// k, attention heads, row widths, the LoRA GEMM shapes), the set-up each placement or tenant
// needs, and the SOL quantities of the GEMVs, attention and decode steps (workloads/qwen3.h's
// rooflines). Throws suite_error.
suite_def load_suite(const std::string& name_or_file, const std::filesystem::path& suites_dir,
                     const suite_validator& validate = {});

// The workloads whose id matches the ECMAScript regex (search, not full match), in their
// order; throws suite_error on a bad regex.
std::vector<suite_workload> filter_workloads(std::vector<suite_workload> w,
                                             const std::string& regex);

// The set-up groups in run order: kernels, engine.whole, engine.partition.idle,
// engine.partition.hog, engine.partition.lora1, lora4, lora16, training.whole. setup_rank is a
// setup's position in it (the list's size for one not in it).
const std::vector<std::string>& suite_setup_order();
std::size_t setup_rank(std::string_view setup);
// Ids in natural order: digit runs compare as numbers (b2 before b16), ties by plain bytes; a
// strict total order on distinct ids.
bool natural_id_less(std::string_view a, std::string_view b);
// Run order: by set-up group (suite_setup_order), so each engine, partition and training set-up
// is built once, and within a group by natural_id_less. Depends only on the set of workloads,
// not on their input order.
std::vector<suite_workload> order_for_run(std::vector<suite_workload> w);

// "31.47 MB / copy_bandwidth", "42.95 GFLOP / bf16_dense_peak"; "-" without a bound.
std::string format_sol_bound(const std::optional<suite_sol>& sol);
double total_cost_seconds(const std::vector<suite_workload>& w);

// docs/suites.md's generated block: a markdown table of the workloads in run order and a line
// with the count and the expected time (`kernelgate suite show NAME --markdown` prints it).
std::string suite_markdown_table(const suite_def& s);

// Back to the file's form (a suite document with the workloads resolved, valid against the
// schema).
nlohmann::json suite_workload_json(const suite_workload& w);
nlohmann::json suite_json(const suite_def& s);

} // namespace kg
