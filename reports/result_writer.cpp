#include "reports/result_writer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iterator>
#include <system_error>

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

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
  fd_ = ::open((dir_ / "records.jsonl").c_str(),
               O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw output_error("cannot write to output folder " + dir_.string());
  envelope_ = {{"schema", result_schema_id}, {"kind", kind},
               {"created", utc_timestamp()}, {"argv", argv},
               {"environment", environment}, {"config", config}};
}

result_writer::result_writer(resume_tag, std::filesystem::path dir, std::string kind,
                             std::vector<std::string> argv, nlohmann::json environment,
                             nlohmann::json config, int* torn)
    : dir_(std::move(dir)) {
  const auto file = dir_ / "records.jsonl";
  if (!std::filesystem::is_regular_file(file))
    throw output_error("nothing to resume: " + file.string() + " does not exist");
  int cut = 0;
  records_ = read_records(file, &cut);
  if (torn) *torn = cut;
  std::error_code ec;
  std::filesystem::remove(dir_ / "result.json", ec);
  if (ec) throw output_error("cannot remove stale " + (dir_ / "result.json").string());
  // Records of work an interrupted run never did (they keep its result's accounting whole) are
  // this run's to do: the file is rewritten without them, torn tail included.
  const auto not_done = [](const nlohmann::json& r) { return r.value("interrupted", false); };
  if (std::any_of(records_.begin(), records_.end(), not_done)) {
    std::erase_if(records_, not_done);
    std::string text;
    for (const auto& r : records_)
      text += r.dump() + "\n";
    write_file_atomically(file, text);
    cut = 0;
  }
  fd_ = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd_ < 0) throw output_error("cannot append to " + file.string());
  if (cut) { // drop the torn tail: the file then ends with its last newline
    std::ifstream in(file, std::ios::binary);
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const std::size_t last = text.rfind('\n');
    const std::size_t whole = last == std::string::npos ? 0 : last + 1;
    if (::ftruncate(fd_, static_cast<off_t>(whole)) != 0)
      throw output_error("cannot cut the torn last line of " + file.string());
  }
  envelope_ = {{"schema", result_schema_id}, {"kind", kind},
               {"created", utc_timestamp()}, {"argv", argv},
               {"environment", environment}, {"config", config}};
}

result_writer::~result_writer() {
  if (fd_ >= 0) ::close(fd_);
}

void result_writer::append(nlohmann::json record) {
  const std::string line = record.dump() + "\n";
  std::size_t done = 0;
  while (done < line.size()) { // a regular file takes it whole; a short write is finished
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw output_error("cannot append to " + (dir_ / "records.jsonl").string());
    done += static_cast<std::size_t>(n);
  }
  records_.push_back(std::move(record));
}

std::string remove_stale_result(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::remove(dir / "result.json", ec);
  return ec ? "cannot remove the stale " + (dir / "result.json").string() + ": " + ec.message()
            : "";
}

std::vector<nlohmann::json> read_records(const std::filesystem::path& file, int* torn) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw output_error("cannot read " + file.string());
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::vector<nlohmann::json> out;
  if (torn) *torn = 0;
  std::size_t from = 0, line = 1;
  while (from < text.size()) {
    const std::size_t end = text.find('\n', from);
    if (end == std::string::npos) { // the last line was cut short: not a record
      if (torn) ++*torn;
      break;
    }
    try {
      out.push_back(nlohmann::json::parse(std::string_view(text).substr(from, end - from)));
    } catch (const nlohmann::json::exception& e) {
      throw output_error(file.string() + ": line " + std::to_string(line) + " is not JSON");
    }
    from = end + 1;
    ++line;
  }
  return out;
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
