#include "sandbox/candidate_batch.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

namespace kg {

namespace fs = std::filesystem;

namespace {

struct split_source {
  std::vector<std::string> includes; // the #include lines, in order
  std::string body;                  // the rest; each #include line left blank (line numbers)
  std::set<std::string> macros;      // names the body #defines
};

std::optional<split_source> split(const std::string& text, std::string* why) {
  static const std::regex include(R"(^\s*#\s*include\b.*)");
  static const std::regex directive(R"(^\s*#\s*(\w+).*)");
  static const std::regex define(R"(^\s*#\s*define\s+(\w+).*)");
  split_source s;
  std::istringstream in(text);
  bool other_directive = false;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, include)) {
      if (other_directive) {
        if (why) *why = "a preprocessor directive comes before an #include";
        return std::nullopt;
      }
      s.includes.push_back(line);
      s.body += "\n";
      continue;
    }
    if (std::regex_match(line, m, directive)) other_directive = true;
    if (std::regex_match(line, m, define)) s.macros.insert(m[1]);
    s.body += line + "\n";
  }
  return s;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

} // namespace

std::optional<std::string> batch_translation_unit(const std::vector<std::string>& sources,
                                                  std::string* why) {
  std::vector<split_source> parts;
  for (const auto& text : sources) {
    auto s = split(text, why);
    if (!s) return std::nullopt;
    if (!parts.empty() && s->includes != parts.front().includes) {
      if (why) *why = "the members' #include lines differ";
      return std::nullopt;
    }
    parts.push_back(std::move(*s));
  }
  if (parts.empty()) return std::string();
  std::string tu = "// A batch of " + std::to_string(parts.size()) +
                   " candidates (sandbox/candidate_batch.h).\n";
  for (const auto& i : parts.front().includes)
    tu += i + "\n";
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const auto n = std::to_string(k);
    tu += "#define kg_run kg_run_" + n + "\nnamespace kg_batch_" + n + " {\n#line 1\n";
    tu += parts[k].body;
    tu += "\n} // namespace kg_batch_" + n + "\n#undef kg_run\n";
    for (const auto& m : parts[k].macros)
      if (m != "kg_run") tu += "#undef " + m + "\n";
  }
  return tu;
}

std::vector<compile_result> compile_in_batches(const std::vector<std::vector<fs::path>>& groups,
                                               const fs::path& batch_dir,
                                               const compile_options& opt,
                                               const batch_options& bo) {
  // One queue of jobs that every compile thread takes from: no barrier between the batches and
  // the sources compiled alone. A job is one source (a group of one: the audit's controls, which
  // gate each task's judging, so they go first) or a batch (then largest first, the longest
  // compiles started while there are still short ones to fill the cores at the end). A batch's
  // text is made by the thread that compiles it; a batch that cannot share a unit or does not
  // compile puts its members back at the queue's front, each a job of its own.
  struct job {
    std::vector<std::size_t> members; // indices into the flat result list
    std::size_t batch = 0;            // the batch file's number (members.size() > 1)
    std::uintmax_t bytes = 0;
  };
  const std::size_t batch_size = std::max<std::size_t>(bo.batch_size, 1);
  const auto& on_compiled = bo.on_compiled;
  std::vector<fs::path> flat;
  std::deque<job> singles;
  std::vector<job> batches;
  for (const auto& g : groups) {
    for (std::size_t from = 0; from < g.size(); from += batch_size) {
      const std::size_t to = std::min(g.size(), from + batch_size);
      job j;
      for (std::size_t i = from; i < to; ++i) {
        j.members.push_back(flat.size());
        flat.push_back(g[i]);
        std::error_code ec;
        const auto n = fs::file_size(g[i], ec);
        j.bytes += ec ? 0 : n;
      }
      if (j.members.size() == 1 || bo.as_given) {
        if (j.members.size() > 1) j.batch = batches.size() + singles.size();
        singles.push_back(std::move(j));
      } else {
        j.batch = batches.size();
        batches.push_back(std::move(j));
      }
    }
  }
  std::stable_sort(batches.begin(), batches.end(), [](const job& a, const job& b) {
    return a.members.size() != b.members.size() ? a.members.size() > b.members.size()
                                                : a.bytes > b.bytes;
  });
  std::deque<job> queue = std::move(singles);
  for (auto& b : batches)
    queue.push_back(std::move(b));
  if (!queue.empty()) fs::create_directories(batch_dir);

  std::vector<compile_result> out(flat.size());
  std::mutex m;
  std::condition_variable cv;
  std::size_t running = 0; // jobs taken and not finished (a batch may put members back)
  auto finish = [&](std::size_t i, compile_result r) {
    out[i] = std::move(r);
    if (on_compiled) on_compiled(i, out[i]);
  };
  auto body = [&] {
    std::unique_lock<std::mutex> l(m);
    for (;;) {
      cv.wait(l, [&] { return !queue.empty() || running == 0; });
      if (queue.empty() || (bo.cancel && *bo.cancel)) return;
      job j = std::move(queue.front());
      queue.pop_front();
      ++running;
      l.unlock();
      std::vector<job> back; // the members of a batch that did not make it, each alone
      if (j.members.size() == 1) {
        finish(j.members[0], compile_candidate(flat[j.members[0]], opt));
      } else {
        std::vector<std::string> texts;
        for (const auto i : j.members)
          texts.push_back(read_text(flat[i]));
        std::optional<compile_result> r;
        if (const auto tu = batch_translation_unit(texts)) {
          const auto file = batch_dir / ("batch-" + std::to_string(j.batch) + ".cu");
          std::ofstream(file, std::ios::binary) << *tu;
          r = compile_candidate(file, opt);
        }
        if (r && r->ok) {
          for (std::size_t k = 0; k < j.members.size(); ++k) {
            auto each = *r;
            each.source = flat[j.members[k]];
            each.symbol = "kg_run_" + std::to_string(k);
            each.seconds = r->seconds / static_cast<double>(j.members.size());
            finish(j.members[k], std::move(each));
          }
        } else {
          for (const auto i : j.members)
            back.push_back({{i}, 0, 0});
        }
      }
      l.lock();
      for (auto it = back.rbegin(); it != back.rend(); ++it)
        queue.push_front(std::move(*it));
      --running;
      cv.notify_all();
    }
  };
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t threads =
      std::min<std::size_t>(flat.size(), opt.jobs > 0 ? static_cast<std::size_t>(opt.jobs) : cores);
  {
    std::vector<std::jthread> pool;
    for (std::size_t k = 0; k < threads; ++k)
      pool.emplace_back(body);
  }
  return out;
}

std::vector<compile_result> compile_in_batches(const std::vector<std::vector<fs::path>>& groups,
                                               const fs::path& batch_dir,
                                               const compile_options& opt, std::size_t batch_size,
                                               const compiled_callback& on_compiled) {
  batch_options bo;
  bo.batch_size = batch_size;
  bo.on_compiled = on_compiled;
  return compile_in_batches(groups, batch_dir, opt, bo);
}

} // namespace kg
