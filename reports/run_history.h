// The run history (`--history FILE.sqlite`, `kernelgate history`, `compare --baseline-from`): every
// finished run of `run`, `eval` and the audits appended to one SQLite database, its records
// summarised one row each, and queried back as per-workload trends or as the BASE run of a
// comparison. The database schema and its migrations are in docs/result-schema.md.
//
// Decisions are stored, not recomputed: when a suite run is appended, each of its workloads is
// compared (reports/run_compare.h, the same bootstrap as `kernelgate compare`) with the same
// workload of the previous run of the same suite in the database, inside the append's
// transaction, and the decision is kept in the record's row. A query then reads rows only, so it
// stays fast however many samples the runs hold.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reports/run_compare.h"

namespace kg {

// A database that cannot be opened, read or written (absent, not SQLite, a newer schema, a
// failed statement), or a query that matches nothing it must: one line naming the file and the
// problem. The CLI's bad input (exit 2).
struct history_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The schema this build writes; older databases are migrated forward when opened for writing.
inline constexpr int history_schema_version = 2;

struct history_append_options {
  compare_options compare; // how each workload's decision against the previous run is made
};

struct history_append_result {
  std::int64_t run_id = 0;
  std::size_t records = 0;
  std::optional<std::int64_t> previous_run; // the run the decisions were made against
  std::size_t slower = 0;                   // workloads decided SLOWER against it
};

struct history_filter {
  std::optional<std::string> workload; // one record id only
  std::optional<std::string> since;    // runs created at or after (ISO 8601 UTC, a date or more)
};

// One run of one workload.
struct history_point {
  std::int64_t run_id = 0;
  std::string kind, series, created, revision; // series: the suite, tasks or audit it ran
  std::optional<bool> dirty;
  std::optional<double> estimate, ci_lo, ci_hi;
  std::optional<bool> gates_pass;
  std::string verdict;  // eval status or audit verdict; empty for suite workloads
  std::string decision; // against the previous run: FASTER, SLOWER, ...; empty for the first
  std::optional<double> ratio, ratio_lo, ratio_hi;
  std::optional<std::int64_t> compared_with; // the previous run's id
};

struct workload_history {
  std::string id, metric, unit, direction;
  std::vector<history_point> points; // oldest first (append order)
};

struct history_build {
  std::string revision;
  std::optional<bool> dirty;
  std::size_t runs = 0;
  std::string first, last; // created of its first and last run
};

struct history_report {
  std::vector<workload_history> workloads; // ordered by id
  std::vector<history_build> builds;       // of the runs the workloads' points come from
};

class run_history {
public:
  // Opens FILE for appending: created when absent, migrated to history_schema_version, WAL mode.
  static run_history open_for_append(const std::filesystem::path& file);
  // Opens an existing FILE to read it (history, compare --baseline-from): absent, empty, not a
  // history database, or a schema newer than this build is a history_error. An older schema is
  // migrated forward first (the queries read the current columns; the file must be writable).
  static run_history open_existing(const std::filesystem::path& file);

  run_history(run_history&&) noexcept;
  run_history& operator=(run_history&&) noexcept;
  ~run_history();

  int schema_version() const;
  std::size_t run_count() const;

  // Appends a result document (the envelope of docs/result-schema.md: a suite run, an eval, an
  // audit, or an audit checker's summary with its verdicts as records) in one BEGIN IMMEDIATE
  // transaction, so concurrent appenders wait their turn (busy timeout) and none loses a row.
  history_append_result append(const nlohmann::json& doc, const history_append_options& opt = {});

  history_report query(const history_filter& filter) const;

  // The BASE document `compare --baseline-from` reads: of the runs of `suite` created before
  // `before` (NEW's created: NEW itself may be in the database already; "" for no bound), the
  // latest whose gates all passed in a complete run, or with `revision`, the latest whose git
  // revision starts with it. The document is the suite_run envelope rebuilt from the rows
  // (records: id, metric, samples, sample_keys, estimate, ci95, gates, error, the SM clock), with
  // "history" {file, run_id}. history_error when none matches.
  nlohmann::json baseline_document(const std::string& suite,
                                   const std::optional<std::string>& revision,
                                   const std::string& before = "") const;

private:
  struct impl;
  explicit run_history(std::unique_ptr<impl> p);
  std::unique_ptr<impl> p_;
};

// "2026-12-01" or "2026-12-01T08:00:00Z" (a prefix of ISO 8601 UTC, compared as text with the
// runs' `created`); throws history_error otherwise.
std::string checked_since(const std::string& text);

nlohmann::json history_report_json(const history_report& r);

} // namespace kg
