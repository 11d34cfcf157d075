// The result envelope every command writes (schema "kernelgate.result/1"). Records stream to
// <out>/records.jsonl as they are produced, one flushed line each, so nothing measured is lost if
// the run dies; <out>/result.json is written once at the end through a temporary file and a
// rename, so a result.json that exists is always complete.
#pragma once

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kg {

inline constexpr const char* result_schema_id = "kernelgate.result/1";

// The output location cannot be used: a bad-input error (exit code 2), raised before any work.
struct output_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class result_writer {
public:
  // Creates `dir`, removes a result.json left there by an earlier run (it would otherwise look
  // like this run's), and opens records.jsonl. Throws output_error when the folder is unusable.
  result_writer(std::filesystem::path dir, std::string kind, std::vector<std::string> argv,
                nlohmann::json environment, nlohmann::json config);
  // Resuming (`kernelgate run --resume DIR`): keeps the whole records of DIR/records.jsonl as this
  // run's first records, cuts a torn last line off the file (a record being written when the run
  // was killed: its work is redone) and appends after them. `torn` gets the lines cut (0 or 1).
  // A record marked "interrupted": true (work an interrupted run wrote down as not done) is
  // dropped from the file: its work is this run's.
  struct resume_tag {};
  result_writer(resume_tag, std::filesystem::path dir, std::string kind,
                std::vector<std::string> argv, nlohmann::json environment, nlohmann::json config,
                int* torn = nullptr);

  ~result_writer();
  result_writer(const result_writer&) = delete;
  result_writer& operator=(const result_writer&) = delete;

  // One write(2) of the whole line, record and newline together: a kill leaves records.jsonl
  // holding whole lines, but for at worst a last line cut short (a SIGKILL ends a write of more
  // than a page part way), which read_records drops.
  void append(nlohmann::json record);
  std::size_t record_count() const { return records_.size(); }
  const std::vector<nlohmann::json>& records() const { return records_; }
  // Writes result.json atomically; returns its path.
  std::filesystem::path finish(nlohmann::json summary);

  const std::filesystem::path& dir() const { return dir_; }

private:
  std::filesystem::path dir_;
  nlohmann::json envelope_;
  std::vector<nlohmann::json> records_;
  int fd_ = -1; // records.jsonl, append-only
};

// Removes DIR/result.json, if any: a command that takes --out calls it before its first check,
// so a result.json present is always this run's, even when the run stops before measuring.
// Returns "" or why it could not.
std::string remove_stale_result(const std::filesystem::path& dir);

// The records of a records.jsonl, line by line; a last line without its newline (a write cut
// short by a kill) is dropped and counted in `torn`. Throws output_error on an unreadable file
// or a malformed whole line.
std::vector<nlohmann::json> read_records(const std::filesystem::path& file, int* torn = nullptr);

std::string utc_timestamp(); // ISO 8601, seconds, "Z"

// Writes `text` to `path` through `path`.tmp + rename (atomic on POSIX within a file system).
void write_file_atomically(const std::filesystem::path& path, const std::string& text);

} // namespace kg
