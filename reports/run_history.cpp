#include "reports/run_history.h"

#include <sqlite3.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "base/printable.h"
#include "reports/result_writer.h"

namespace kg {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// ---- schema and migrations -------------------------------------------------------------------

// Migration k takes a database at version k to k + 1 (0: an empty file). They run in order in
// one BEGIN IMMEDIATE transaction, so two processes opening a fresh file at once create it once.
// Never edit one that has shipped: add the next.
constexpr const char* migrations[] = {
    // 0 -> 1: the first form: runs with their documents, records with their estimate and samples.
    "CREATE TABLE schema_version (version INTEGER NOT NULL);"
    "INSERT INTO schema_version VALUES (1);"
    "CREATE TABLE runs (run_id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL,"
    " series TEXT NOT NULL, created TEXT NOT NULL, git_revision TEXT, git_dirty INTEGER,"
    " environment TEXT NOT NULL, config TEXT NOT NULL, summary TEXT NOT NULL);"
    "CREATE TABLE records (run_id INTEGER NOT NULL REFERENCES runs(run_id), seq INTEGER NOT NULL,"
    " id TEXT NOT NULL, metric TEXT, unit TEXT, estimate REAL, ci_lo REAL, ci_hi REAL,"
    " samples TEXT, PRIMARY KEY (run_id, seq));",
    // 1 -> 2: what a comparison needs (direction, sample keys, gates, the SM clock), the generic
    // verdict of eval and audit records, the decision against the previous run, the indexes of
    // `history --workload` and `--baseline-from`. Version-1 times were all lower-is-better.
    "ALTER TABLE runs ADD COLUMN finished TEXT;"
    "ALTER TABLE runs ADD COLUMN status TEXT;"
    "ALTER TABLE runs ADD COLUMN argv TEXT;"
    "ALTER TABLE runs ADD COLUMN gates_passed INTEGER;"
    "ALTER TABLE records ADD COLUMN direction TEXT;"
    "ALTER TABLE records ADD COLUMN sample_keys TEXT;"
    "ALTER TABLE records ADD COLUMN gates TEXT;"
    "ALTER TABLE records ADD COLUMN gates_pass INTEGER;"
    "ALTER TABLE records ADD COLUMN verdict TEXT;"
    "ALTER TABLE records ADD COLUMN error TEXT;"
    "ALTER TABLE records ADD COLUMN clock TEXT;"
    "ALTER TABLE records ADD COLUMN decision TEXT;"
    "ALTER TABLE records ADD COLUMN ratio REAL;"
    "ALTER TABLE records ADD COLUMN ratio_lo REAL;"
    "ALTER TABLE records ADD COLUMN ratio_hi REAL;"
    "ALTER TABLE records ADD COLUMN compared_with INTEGER;"
    "UPDATE records SET direction = 'lower' WHERE unit IN ('s', 'ms', 'us', 'ns');"
    "CREATE INDEX records_by_id ON records(id, run_id);"
    "CREATE INDEX runs_by_series ON runs(kind, series, run_id);"
    "UPDATE schema_version SET version = 2;",
};
static_assert(std::size(migrations) == history_schema_version);

// ---- the SQLite C API, owned and checked -----------------------------------------------------

struct db_closer {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
struct stmt_finalizer {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using db_ptr = std::unique_ptr<sqlite3, db_closer>;
using stmt_ptr = std::unique_ptr<sqlite3_stmt, stmt_finalizer>;

class database {
public:
  database(fs::path file, db_ptr db) : file_(std::move(file)), db_(std::move(db)) {}

  // Every call's result goes through here: anything but the expected codes is a one-line error
  // naming the file, what was being done and SQLite's own message.
  void check(int rc, const char* doing, int ok = SQLITE_OK) const {
    if (rc == ok) return;
    throw history_error("history '" + printable(file_.string()) + "': " + doing + ": " +
                        (db_ ? sqlite3_errmsg(db_.get()) : sqlite3_errstr(rc)));
  }

  void exec(const char* sql, const char* doing) const {
    check(sqlite3_exec(db_.get(), sql, nullptr, nullptr, nullptr), doing);
  }

  stmt_ptr prepare(const char* sql, const char* doing) const {
    sqlite3_stmt* s = nullptr;
    check(sqlite3_prepare_v2(db_.get(), sql, -1, &s, nullptr), doing);
    return stmt_ptr(s);
  }

  // One step: true for a row, false when done.
  bool step(sqlite3_stmt* s, const char* doing) const {
    const int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) return true;
    check(rc, doing, SQLITE_DONE);
    return false;
  }

  std::int64_t last_rowid() const { return sqlite3_last_insert_rowid(db_.get()); }
  // For a destructor: no throw, and nothing to report if the transaction is already gone.
  void rollback() const noexcept { sqlite3_exec(db_.get(), "ROLLBACK", nullptr, nullptr, nullptr); }
  const fs::path& file() const { return file_; }

private:
  fs::path file_;
  db_ptr db_;
};

// Binding helpers: a missing value is NULL.
struct binder {
  const database& db;
  sqlite3_stmt* s;
  int i = 0;

  binder& text(const std::optional<std::string>& v) {
    ++i;
    db.check(v ? sqlite3_bind_text(s, i, v->data(), static_cast<int>(v->size()), SQLITE_TRANSIENT)
               : sqlite3_bind_null(s, i),
             "binding a value");
    return *this;
  }
  binder& real(const std::optional<double>& v) {
    ++i;
    db.check(v ? sqlite3_bind_double(s, i, *v) : sqlite3_bind_null(s, i), "binding a value");
    return *this;
  }
  binder& integer(const std::optional<std::int64_t>& v) {
    ++i;
    db.check(v ? sqlite3_bind_int64(s, i, *v) : sqlite3_bind_null(s, i), "binding a value");
    return *this;
  }
};

std::optional<std::string> column_text(sqlite3_stmt* s, int c) {
  if (sqlite3_column_type(s, c) == SQLITE_NULL) return std::nullopt;
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, c));
  return std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(s, c)));
}
std::optional<double> column_real(sqlite3_stmt* s, int c) {
  if (sqlite3_column_type(s, c) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_double(s, c);
}
std::optional<std::int64_t> column_int(sqlite3_stmt* s, int c) {
  if (sqlite3_column_type(s, c) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_int64(s, c);
}
std::optional<bool> column_bool(sqlite3_stmt* s, int c) {
  const auto v = column_int(s, c);
  return v ? std::optional<bool>(*v != 0) : std::nullopt;
}

// Rolls back unless committed: an exception half-way leaves the database as it was.
class transaction {
public:
  explicit transaction(const database& db) : db_(db) {
    db_.exec("BEGIN IMMEDIATE", "starting a write transaction");
  }
  transaction(const transaction&) = delete;
  transaction& operator=(const transaction&) = delete;
  void commit() {
    db_.exec("COMMIT", "committing");
    done_ = true;
  }
  ~transaction() {
    if (!done_) db_.rollback();
  }

private:
  const database& db_;
  bool done_ = false;
};

// Long enough for another process's append (a 160-workload run with its decisions) to finish.
constexpr int busy_timeout_ms = 120'000;

std::string where(const fs::path& file) {
  return "history '" + printable(file.string()) + "'";
}

database open_handle(const fs::path& file, bool create) {
  std::error_code ec;
  const auto st = fs::status(file, ec);
  if (!create && !fs::exists(st)) throw history_error(where(file) + " does not exist");
  if (fs::is_directory(st)) throw history_error(where(file) + " is a folder, not a database");
  sqlite3* raw = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
  const int rc = sqlite3_open_v2(file.c_str(), &raw, flags, nullptr);
  db_ptr db(raw);
  if (rc != SQLITE_OK)
    throw history_error(where(file) +
                        ": cannot open: " + (raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)));
  database d(file, std::move(db));
  d.check(sqlite3_busy_timeout(raw, busy_timeout_ms), "setting the busy timeout");
  return d;
}

// WAL: readers never block the appender, and appenders queue on the write lock. Switching the
// mode takes a lock of its own that the busy handler does not always wait for, so it retries.
void use_wal(const database& db) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(busy_timeout_ms);
  for (;;) {
    auto s = db.prepare("PRAGMA journal_mode=WAL", "setting WAL mode");
    const int rc = sqlite3_step(s.get());
    if (rc == SQLITE_ROW) {
      const auto mode = column_text(s.get(), 0).value_or("");
      if (mode != "wal")
        throw history_error(where(db.file()) + ": cannot use WAL mode (journal mode " + mode + ")");
      return;
    }
    if (rc != SQLITE_BUSY || std::chrono::steady_clock::now() > deadline)
      db.check(rc, "setting WAL mode", SQLITE_ROW);
    s.reset();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// 0 for a file without tables (new); throws for one with tables but no schema_version.
int read_version(const database& db) {
  auto t = db.prepare("SELECT count(*), sum(name = 'schema_version') FROM sqlite_master "
                      "WHERE type = 'table'",
                      "reading the schema version");
  db.step(t.get(), "reading the schema version");
  const auto tables = column_int(t.get(), 0).value_or(0);
  if (tables == 0) return 0;
  if (column_int(t.get(), 1).value_or(0) == 0)
    throw history_error(where(db.file()) +
                        " is not a kernelgate history database (no schema_version table)");
  auto v = db.prepare("SELECT version FROM schema_version", "reading the schema version");
  if (!db.step(v.get(), "reading the schema version"))
    throw history_error(where(db.file()) + ": schema_version is empty");
  return static_cast<int>(column_int(v.get(), 0).value_or(0));
}

void check_not_newer(const database& db, int v) {
  if (v > history_schema_version)
    throw history_error(where(db.file()) + " was written by a newer kernelgate (schema version " +
                        std::to_string(v) + "; this build knows up to " +
                        std::to_string(history_schema_version) + ")");
}

// Forward migrations, once, under the write lock (another process may have migrated meanwhile).
void migrate(const database& db) {
  transaction t(db);
  const int v = read_version(db);
  check_not_newer(db, v);
  for (int k = v; k < history_schema_version; ++k)
    db.exec(migrations[k], ("migrating the schema from version " + std::to_string(k)).c_str());
  t.commit();
}

// ---- from a result document to rows ---------------------------------------------------------

std::optional<std::string> string_at(const json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_string()) return std::nullopt;
  return obj[key].get<std::string>();
}
std::optional<double> number_at(const json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_number()) return std::nullopt;
  return obj[key].get<double>();
}
std::optional<std::string> dump_at(const json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key) || obj[key].is_null()) return std::nullopt;
  return obj[key].dump();
}
std::optional<std::int64_t> as_int(const std::optional<bool>& b) {
  return b ? std::optional<std::int64_t>(*b ? 1 : 0) : std::nullopt;
}

// What a run is a run of: the suite, the task glob, the audit, the checker.
std::string series_of(const json& doc) {
  const auto& c = doc["config"];
  for (const char* key : {"suite", "tasks", "audit", "checker"})
    if (auto s = string_at(c, key)) return *s;
  return doc["kind"].get<std::string>();
}

std::optional<bool> all_gates_pass(const json& rec) {
  if (!rec.is_object() || !rec.contains("gates") || !rec["gates"].is_array()) return std::nullopt;
  for (const auto& g : rec["gates"])
    if (!g.is_object() || g.value("pass", json()) != true) return false;
  return true;
}

// The run's own statement, else every record's gates (none with gates: unknown).
std::optional<bool> run_gates_passed(const json& doc) {
  const auto& s = doc["summary"];
  if (s.is_object() && s.contains("gates_passed") && s["gates_passed"].is_boolean())
    return s["gates_passed"].get<bool>();
  std::optional<bool> all;
  for (const auto& rec : doc["records"])
    if (const auto p = all_gates_pass(rec)) all = all.value_or(true) && *p;
  return all;
}

// A record's name in the history: its id, else an audit checker's row (with the checker's
// column), else task/candidate, else its type and position.
std::string record_id(const json& rec, std::size_t seq) {
  if (auto id = string_at(rec, "id")) return *id;
  if (auto row = string_at(rec, "row")) {
    for (const char* col : {"protocol", "checker"})
      if (auto c = string_at(rec, col)) return *row + "@" + *c;
    return *row;
  }
  if (auto task = string_at(rec, "task"))
    return *task + (string_at(rec, "candidate") ? "/" + *string_at(rec, "candidate") : "");
  return string_at(rec, "type").value_or("record") + "#" + std::to_string(seq);
}

// The part of `extra` a comparison reads: the SM clock the workload ran at.
std::optional<std::string> clock_of(const json& rec) {
  if (!rec.is_object() || !rec.contains("extra") || !rec["extra"].is_object()) return std::nullopt;
  const auto& extra = rec["extra"];
  json kept = json::object();
  if (extra.contains("gpu_clocks") && extra["gpu_clocks"].is_object() &&
      extra["gpu_clocks"].contains("sm_mhz"))
    kept["gpu_clocks"] = {{"sm_mhz", extra["gpu_clocks"]["sm_mhz"]}};
  if (extra.contains("timing") && extra["timing"].is_object() &&
      extra["timing"].contains("modal_sm_mhz"))
    kept["timing"] = {{"modal_sm_mhz", extra["timing"]["modal_sm_mhz"]}};
  if (kept.empty()) return std::nullopt;
  return kept.dump();
}

// `audit checker --protocol`'s row judged by several checkers: "kbv=killed strict=survived".
std::optional<std::string> checks_verdict(const json& rec) {
  if (!rec.contains("checks") || !rec["checks"].is_object()) return std::nullopt;
  std::string all;
  for (const auto& [name, check] : rec["checks"].items())
    if (auto v = string_at(check, "verdict")) all += (all.empty() ? "" : " ") + name + "=" + *v;
  return all.empty() ? std::nullopt : std::optional(all);
}

struct record_row {
  std::string id;
  std::optional<std::string> metric, unit, direction, samples, sample_keys, gates, verdict, error,
      clock, decision;
  std::optional<double> estimate, ci_lo, ci_hi, ratio, ratio_lo, ratio_hi;
  std::optional<bool> gates_pass;
  std::optional<std::int64_t> compared_with;
};

record_row row_of(const json& rec, std::size_t seq) {
  record_row r;
  r.id = record_id(rec, seq);
  if (rec.contains("metric") && rec["metric"].is_object()) {
    r.metric = string_at(rec["metric"], "name");
    r.unit = string_at(rec["metric"], "unit");
    r.direction = string_at(rec["metric"], "direction");
    r.estimate = number_at(rec, "estimate");
  } else if (auto speedup = number_at(rec, "speedup")) { // an eval record's key metric
    r.metric = "speedup";
    r.unit = "x";
    r.direction = "higher";
    r.estimate = speedup;
  }
  for (const char* key : {"ci95", "speedup_ci95"})
    if (rec.contains(key) && rec[key].is_array() && rec[key].size() == 2 &&
        rec[key][0].is_number() && rec[key][1].is_number()) {
      r.ci_lo = rec[key][0].get<double>();
      r.ci_hi = rec[key][1].get<double>();
    }
  r.samples = dump_at(rec, "samples");
  r.sample_keys = dump_at(rec, "sample_keys");
  r.gates = dump_at(rec, "gates");
  r.gates_pass = all_gates_pass(rec);
  r.verdict = string_at(rec, "verdict");
  if (!r.verdict) r.verdict = string_at(rec, "status");
  if (!r.verdict) r.verdict = checks_verdict(rec);
  r.error = string_at(rec, "error");
  r.clock = clock_of(rec);
  return r;
}

void check_document(const fs::path& file, const json& doc) {
  const auto bad = [&](const std::string& why) {
    return history_error(where(file) + ": the run to append is not a result document: " + why);
  };
  if (!doc.is_object()) throw bad("not a JSON object");
  for (const char* key : {"kind", "created"})
    if (!string_at(doc, key)) throw bad(std::string("\"") + key + "\" is not a string");
  for (const char* key : {"environment", "config", "summary"})
    if (!doc.contains(key) || !doc[key].is_object())
      throw bad(std::string("\"") + key + "\" is not an object");
  if (!doc.contains("records") || !doc["records"].is_array())
    throw bad("\"records\" is not an array");
}

json parse_stored(const database& db, const std::optional<std::string>& text, const char* what) {
  if (!text) return json();
  try {
    return json::parse(*text);
  } catch (const json::exception&) {
    throw history_error(where(db.file()) + ": a stored " + what + " is not JSON (corrupt row)");
  }
}

} // namespace

// ---- the database ----------------------------------------------------------------------------

struct run_history::impl {
  database db;

  void insert_records(std::int64_t run_id, const std::vector<record_row>& rows) const;
  std::int64_t insert_run(const json& doc) const;
  std::optional<std::int64_t> last_run(const std::string& kind, const std::string& series) const;
  json document_of(std::int64_t run_id) const;
};

std::int64_t run_history::impl::insert_run(const json& doc) const {
  auto s = db.prepare("INSERT INTO runs (kind, series, created, finished, status, git_revision,"
                      " git_dirty, gates_passed, argv, environment, config, summary)"
                      " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                      "preparing the run's insert");
  const auto& env = doc["environment"];
  const json git = env.contains("git") && env["git"].is_object() ? env["git"] : json::object();
  std::optional<bool> dirty;
  if (git.contains("dirty") && git["dirty"].is_boolean()) dirty = git["dirty"].get<bool>();
  binder(db, s.get())
      .text(doc["kind"].get<std::string>())
      .text(series_of(doc))
      .text(doc["created"].get<std::string>())
      .text(string_at(doc, "finished"))
      .text(string_at(doc["summary"], "status"))
      .text(string_at(git, "revision"))
      .integer(as_int(dirty))
      .integer(as_int(run_gates_passed(doc)))
      .text(dump_at(doc, "argv"))
      .text(env.dump())
      .text(doc["config"].dump())
      .text(doc["summary"].dump());
  db.step(s.get(), "inserting the run");
  return db.last_rowid();
}

void run_history::impl::insert_records(std::int64_t run_id,
                                       const std::vector<record_row>& rows) const {
  auto s = db.prepare("INSERT INTO records (run_id, seq, id, metric, unit, direction, estimate,"
                      " ci_lo, ci_hi, samples, sample_keys, gates, gates_pass, verdict, error,"
                      " clock, decision, ratio, ratio_lo, ratio_hi, compared_with)"
                      " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                      "preparing the records' insert");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    db.check(sqlite3_reset(s.get()), "inserting a record");
    binder(db, s.get())
        .integer(run_id)
        .integer(static_cast<std::int64_t>(i))
        .text(r.id)
        .text(r.metric)
        .text(r.unit)
        .text(r.direction)
        .real(r.estimate)
        .real(r.ci_lo)
        .real(r.ci_hi)
        .text(r.samples)
        .text(r.sample_keys)
        .text(r.gates)
        .integer(as_int(r.gates_pass))
        .text(r.verdict)
        .text(r.error)
        .text(r.clock)
        .text(r.decision)
        .real(r.ratio)
        .real(r.ratio_lo)
        .real(r.ratio_hi)
        .integer(r.compared_with);
    db.step(s.get(), "inserting a record");
  }
}

std::optional<std::int64_t> run_history::impl::last_run(const std::string& kind,
                                                        const std::string& series) const {
  auto s = db.prepare("SELECT max(run_id) FROM runs WHERE kind = ? AND series = ?",
                      "finding the previous run");
  binder(db, s.get()).text(kind).text(series);
  db.step(s.get(), "finding the previous run");
  return column_int(s.get(), 0);
}

// The suite_run envelope of a stored run, with the fields `compare` reads.
json run_history::impl::document_of(std::int64_t run_id) const {
  auto r = db.prepare("SELECT kind, created, finished, argv, environment, config, summary"
                      " FROM runs WHERE run_id = ?",
                      "reading a run");
  binder(db, r.get()).integer(run_id);
  if (!db.step(r.get(), "reading a run"))
    throw history_error(where(db.file()) + ": no run " + std::to_string(run_id));
  json doc = {{"schema", result_schema_id},
              {"kind", column_text(r.get(), 0).value_or("")},
              {"created", column_text(r.get(), 1).value_or("")},
              {"finished", column_text(r.get(), 2).value_or("")},
              {"argv", parse_stored(db, column_text(r.get(), 3), "argv")},
              {"environment", parse_stored(db, column_text(r.get(), 4), "environment")},
              {"config", parse_stored(db, column_text(r.get(), 5), "config")},
              {"summary", parse_stored(db, column_text(r.get(), 6), "summary")},
              {"history", {{"file", db.file().string()}, {"run_id", run_id}}}};
  auto s = db.prepare("SELECT id, metric, unit, direction, estimate, ci_lo, ci_hi, samples,"
                      " sample_keys, gates, error, clock FROM records WHERE run_id = ?"
                      " ORDER BY seq",
                      "reading a run's records");
  binder(db, s.get()).integer(run_id);
  json records = json::array();
  while (db.step(s.get(), "reading a run's records")) {
    // Without a metric and its direction (a version-1 row of a metric not a time) a record
    // cannot be compared: left out, `compare` lists it as missing from BASE.
    if (!column_text(s.get(), 1) || !column_text(s.get(), 3)) continue;
    json rec = {{"type", "suite_workload"},
                {"id", column_text(s.get(), 0).value_or("")},
                {"metric",
                 {{"name", column_text(s.get(), 1).value_or("")},
                  {"unit", column_text(s.get(), 2).value_or("")},
                  {"direction", column_text(s.get(), 3).value_or("")}}}};
    if (auto e = column_real(s.get(), 4)) rec["estimate"] = *e;
    if (auto lo = column_real(s.get(), 5), hi = column_real(s.get(), 6); lo && hi)
      rec["ci95"] = {*lo, *hi};
    for (const auto& [col, key] : {std::pair{7, "samples"}, std::pair{8, "sample_keys"},
                                   std::pair{9, "gates"}, std::pair{11, "extra"}})
      if (auto t = column_text(s.get(), col)) rec[key] = parse_stored(db, t, key);
    if (auto e = column_text(s.get(), 10)) rec["error"] = *e;
    records.push_back(std::move(rec));
  }
  doc["records"] = std::move(records);
  doc["summary"]["status"] = doc["summary"].value("status", "complete");
  return doc;
}

run_history::run_history(std::unique_ptr<impl> p) : p_(std::move(p)) {}
run_history::run_history(run_history&&) noexcept = default;
run_history& run_history::operator=(run_history&&) noexcept = default;
run_history::~run_history() = default;

run_history run_history::open_for_append(const fs::path& file) {
  auto db = open_handle(file, true);
  check_not_newer(db, read_version(db)); // before WAL: a foreign database is left as it was
  use_wal(db);
  migrate(db);
  return run_history(std::make_unique<impl>(impl{std::move(db)}));
}

run_history run_history::open_existing(const fs::path& file) {
  auto db = open_handle(file, false);
  const int v = read_version(db);
  if (v == 0) throw history_error(where(file) + " is not a kernelgate history database (empty)");
  check_not_newer(db, v);
  use_wal(db);
  if (v < history_schema_version) migrate(db);
  return run_history(std::make_unique<impl>(impl{std::move(db)}));
}

int run_history::schema_version() const {
  return read_version(p_->db);
}

std::size_t run_history::run_count() const {
  auto s = p_->db.prepare("SELECT count(*) FROM runs", "counting runs");
  p_->db.step(s.get(), "counting runs");
  return static_cast<std::size_t>(column_int(s.get(), 0).value_or(0));
}

history_append_result run_history::append(const json& doc, const history_append_options& opt) {
  const auto& db = p_->db;
  check_document(db.file(), doc);
  std::vector<record_row> rows;
  for (std::size_t i = 0; i < doc["records"].size(); ++i)
    rows.push_back(row_of(doc["records"][i], i));
  history_append_result out;
  transaction t(db);
  const auto kind = doc["kind"].get<std::string>();
  if (kind == "suite_run") // decisions against the previous run of the suite, under the lock
    if ((out.previous_run = p_->last_run(kind, series_of(doc)))) {
      compare_options c = opt.compare;
      c.allow_env_change = true; // the builds and machines are the history's to show
      std::map<std::string, const workload_comparison*> by_id;
      run_comparison cmp;
      try {
        const auto base = suite_run_from_document(
            p_->document_of(*out.previous_run),
            db.file().string() + "#" + std::to_string(*out.previous_run), "BASE");
        const auto next = suite_run_from_document(doc, "the run appended", "NEW");
        cmp = compare_runs(base, next, c);
      } catch (const compare_input_error& e) {
        throw history_error(where(db.file()) + ": " + e.what());
      }
      for (const auto& w : cmp.workloads)
        by_id[w.id] = &w;
      for (auto& r : rows) {
        const auto it = by_id.find(r.id);
        if (it == by_id.end() || it->second->status == compare_status::missing) continue;
        const auto& w = *it->second;
        r.decision = std::string(compare_status_name(w.status));
        r.compared_with = out.previous_run;
        if (w.ratio) {
          r.ratio = w.ratio->ratio;
          r.ratio_lo = w.ratio->lo;
          r.ratio_hi = w.ratio->hi;
        }
        out.slower += w.status == compare_status::slower;
      }
    }
  out.run_id = p_->insert_run(doc);
  p_->insert_records(out.run_id, rows);
  t.commit();
  out.records = rows.size();
  return out;
}

history_report run_history::query(const history_filter& filter) const {
  const auto& db = p_->db;
  const std::string columns =
      "SELECT r.id, r.metric, r.unit, r.direction, r.estimate, r.ci_lo, r.ci_hi, r.gates_pass,"
      " r.verdict, r.decision, r.ratio, r.ratio_lo, r.ratio_hi, r.compared_with, u.run_id,"
      " u.kind, u.series, u.created, u.git_revision, u.git_dirty"
      " FROM records r JOIN runs u ON u.run_id = r.run_id";
  // One id: the (id, run_id) index walks its rows in run order.
  const std::string sql = filter.workload
                              ? columns + " WHERE r.id = ?1 AND u.created >= ?2 ORDER BY r.run_id"
                              : columns + " WHERE u.created >= ?2 ORDER BY r.id, r.run_id";
  auto s = db.prepare(sql.c_str(), "querying the history");
  if (filter.workload) binder(db, s.get()).text(*filter.workload);
  binder{db, s.get(), 1}.text(filter.since.value_or(""));
  history_report rep;
  std::map<std::pair<std::string, std::optional<bool>>, history_build> builds;
  std::set<std::int64_t> runs_seen;
  while (db.step(s.get(), "querying the history")) {
    const auto id = column_text(s.get(), 0).value_or("");
    if (rep.workloads.empty() || rep.workloads.back().id != id) {
      rep.workloads.emplace_back();
      rep.workloads.back().id = id;
    }
    auto& w = rep.workloads.back();
    // The newest run names the metric (a metric renamed later shows as it is now).
    w.metric = column_text(s.get(), 1).value_or("");
    w.unit = column_text(s.get(), 2).value_or("");
    w.direction = column_text(s.get(), 3).value_or("");
    history_point p;
    p.estimate = column_real(s.get(), 4);
    p.ci_lo = column_real(s.get(), 5);
    p.ci_hi = column_real(s.get(), 6);
    p.gates_pass = column_bool(s.get(), 7);
    p.verdict = column_text(s.get(), 8).value_or("");
    p.decision = column_text(s.get(), 9).value_or("");
    p.ratio = column_real(s.get(), 10);
    p.ratio_lo = column_real(s.get(), 11);
    p.ratio_hi = column_real(s.get(), 12);
    p.compared_with = column_int(s.get(), 13);
    p.run_id = column_int(s.get(), 14).value_or(0);
    p.kind = column_text(s.get(), 15).value_or("");
    p.series = column_text(s.get(), 16).value_or("");
    p.created = column_text(s.get(), 17).value_or("");
    p.revision = column_text(s.get(), 18).value_or("");
    p.dirty = column_bool(s.get(), 19);
    if (runs_seen.insert(p.run_id).second) {
      auto& b = builds[{p.revision, p.dirty}];
      b.revision = p.revision;
      b.dirty = p.dirty;
      ++b.runs;
      if (b.first.empty() || p.created < b.first) b.first = p.created;
      if (p.created > b.last) b.last = p.created;
    }
    w.points.push_back(std::move(p));
  }
  for (auto& [key, b] : builds)
    rep.builds.push_back(std::move(b));
  std::sort(rep.builds.begin(), rep.builds.end(),
            [](const history_build& a, const history_build& b) { return a.first < b.first; });
  return rep;
}

json run_history::baseline_document(const std::string& suite,
                                    const std::optional<std::string>& revision,
                                    const std::string& before) const {
  const auto& db = p_->db;
  // A revision prefix matched with substr, not LIKE: a revision holds no wildcards to escape.
  const std::string which = revision ? " AND substr(git_revision, 1, length(?3)) = ?3"
                                     : " AND gates_passed = 1 AND status = 'complete'";
  const std::string sql = "SELECT run_id FROM runs WHERE kind = 'suite_run' AND series = ?1" +
                          std::string(before.empty() ? "" : " AND created < ?2") + which +
                          " ORDER BY created DESC, run_id DESC LIMIT 1";
  auto s = db.prepare(sql.c_str(), "finding the baseline run");
  binder(db, s.get()).text(suite);
  if (!before.empty()) binder{db, s.get(), 1}.text(before);
  if (revision) binder{db, s.get(), 2}.text(revision);
  if (!db.step(s.get(), "finding the baseline run"))
    throw history_error(where(db.file()) + " has no run of suite '" + printable(suite) + "'" +
                        (before.empty() ? "" : " before " + before) +
                        (revision ? " at revision '" + printable(*revision) + "'"
                                  : " that completed with every gate passing"));
  return p_->document_of(column_int(s.get(), 0).value_or(0));
}

std::string checked_since(const std::string& text) {
  // YYYY-MM-DD, then optionally THH, :MM, :SS, fraction, Z: a prefix of the runs' timestamps.
  const std::string shape = "dddd-dd-ddTdd:dd:dd";
  bool ok = text.size() >= 10;
  std::size_t i = 0;
  for (; ok && i < text.size() && i < shape.size(); ++i)
    ok = shape[i] == 'd' ? std::isdigit(static_cast<unsigned char>(text[i])) != 0
                         : text[i] == shape[i];
  const bool cut_well = i == 10 || i == 13 || i == 16 || i == 19;
  std::string rest = text.substr(std::min(i, text.size()));
  if (i == 19 && !rest.empty() && rest[0] == '.') {
    std::size_t k = 1;
    while (k < rest.size() && std::isdigit(static_cast<unsigned char>(rest[k])))
      ++k;
    ok = ok && k > 1;
    rest = rest.substr(k);
  }
  ok = ok && cut_well && (rest.empty() || (rest == "Z" && i > 10));
  const int month = ok ? std::stoi(text.substr(5, 2)) : 0,
            day = ok ? std::stoi(text.substr(8, 2)) : 0;
  if (!ok || month < 1 || month > 12 || day < 1 || day > 31)
    throw history_error("--since '" + printable(text) +
                        "' is not a UTC date or time (2026-12-01 or 2026-12-01T08:00:00Z)");
  return rest == "Z" ? text.substr(0, text.size() - 1) : text;
}

json history_report_json(const history_report& r) {
  const auto opt = [](const auto& v) { return v ? json(*v) : json(); };
  json workloads = json::array();
  for (const auto& w : r.workloads) {
    json points = json::array(), slower = json::array();
    for (const auto& p : w.points) {
      points.push_back(
          {{"run_id", p.run_id},
           {"created", p.created},
           {"kind", p.kind},
           {"series", p.series},
           {"revision", p.revision},
           {"dirty", opt(p.dirty)},
           {"estimate", opt(p.estimate)},
           {"ci95", p.ci_lo && p.ci_hi ? json{*p.ci_lo, *p.ci_hi} : json()},
           {"gates_pass", opt(p.gates_pass)},
           {"verdict", p.verdict.empty() ? json() : json(p.verdict)},
           {"decision", p.decision.empty() ? json() : json(p.decision)},
           {"ratio", opt(p.ratio)},
           {"ratio_ci95", p.ratio_lo && p.ratio_hi ? json{*p.ratio_lo, *p.ratio_hi} : json()},
           {"compared_with", opt(p.compared_with)}});
      if (p.decision == "SLOWER") slower.push_back(p.run_id);
    }
    workloads.push_back(
        {{"id", w.id},
         {"metric", {{"name", w.metric}, {"unit", w.unit}, {"direction", w.direction}}},
         {"points", std::move(points)},
         {"slower_runs", std::move(slower)}});
  }
  json builds = json::array();
  for (const auto& b : r.builds)
    builds.push_back({{"revision", b.revision},
                      {"dirty", opt(b.dirty)},
                      {"runs", b.runs},
                      {"first", b.first},
                      {"last", b.last}});
  return {{"workloads", std::move(workloads)}, {"builds", std::move(builds)}};
}

} // namespace kg
