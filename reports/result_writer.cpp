#include "reports/result_writer.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <system_error>

namespace kg {

std::string utc_timestamp() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void write_file_atomically(const std::filesystem::path& path, const std::string& text) {
  const auto tmp = std::filesystem::path(path.string() + ".tmp");
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw output_error("cannot write " + tmp.string());
    f << text;
    f.flush();
    if (!f) throw output_error("write failed for " + tmp.string());
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec)
    throw output_error("cannot rename " + tmp.string() + " to " + path.string() + ": " +
                       ec.message());
}

result_writer::result_writer(std::filesystem::path dir, std::string kind,
                             std::vector<std::string> argv, nlohmann::json environment,
                             nlohmann::json config)
    : dir_(std::move(dir)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec || !std::filesystem::is_directory(dir_))
    throw output_error("cannot create output folder " + dir_.string() +
                       (ec ? ": " + ec.message() : ": not a folder"));
  std::filesystem::remove(dir_ / "result.json", ec);
  if (ec) throw output_error("cannot remove stale " + (dir_ / "result.json").string());
  stream_.open(dir_ / "records.jsonl", std::ios::binary | std::ios::trunc);
  if (!stream_) throw output_error("cannot write to output folder " + dir_.string());
  envelope_ = {{"schema", result_schema_id}, {"kind", kind},
               {"created", utc_timestamp()}, {"argv", argv},
               {"environment", environment}, {"config", config}};
}

void result_writer::append(nlohmann::json record) {
  stream_ << record.dump() << '\n';
  stream_.flush();
  if (!stream_) throw output_error("cannot append to " + (dir_ / "records.jsonl").string());
  records_.push_back(std::move(record));
}

std::filesystem::path result_writer::finish(nlohmann::json summary) {
  nlohmann::json doc = envelope_;
  doc["finished"] = utc_timestamp();
  doc["records"] = records_;
  doc["summary"] = std::move(summary);
  const auto path = dir_ / "result.json";
  write_file_atomically(path, doc.dump(1) + "\n");
  return path;
}

} // namespace kg
