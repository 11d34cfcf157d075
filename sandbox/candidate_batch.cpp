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

constexpr std::size_t npos = static_cast<std::size_t>(-1);

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

std::size_t probed_batch_size(double probe_seconds, double cheapest_seconds, double batch_seconds,
                              std::size_t batch_size) {
  batch_size = std::max<std::size_t>(batch_size, 1);
  if (batch_seconds <= 0 || probe_seconds <= 0) return batch_size;
  const double each = std::max(probe_seconds - cheapest_seconds, 0.0);
  if (each <= 0) return batch_size;
  const double more = (batch_seconds - probe_seconds) / each; // members past the first
  if (more < 1) return 1;
  return std::min<std::size_t>(batch_size, 1 + static_cast<std::size_t>(more));
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
  // compile puts its members back at the queue's front, each a job of its own. A group sized by a
  // probe is one job until then: taken once the probe is known, it puts its batches back at the
  // queue's front.
  struct job {
    std::vector<std::size_t> members; // indices into the flat result list
    std::size_t batch = 0;            // the batch file's number (members.size() > 1)
    std::uintmax_t bytes = 0;
    std::size_t probe = npos; // a whole group waiting for this flat index's compile
  };
  const std::size_t batch_size = std::max<std::size_t>(bo.batch_size, 1);
  const auto& on_compiled = bo.on_compiled;
  std::vector<fs::path> flat;
  std::vector<std::size_t> first_of_group;
  for (const auto& g : groups) {
    first_of_group.push_back(flat.size());
    flat.insert(flat.end(), g.begin(), g.end());
  }
  auto probe_of = [&](std::size_t g) -> std::size_t {
    // A probe is a group of one source (never itself waiting for a probe).
    if (bo.batch_seconds <= 0 || g >= bo.probes.size() || bo.probes[g] >= groups.size() ||
        groups[bo.probes[g]].size() != 1 || groups[g].size() < 2)
      return npos;
    return first_of_group[bo.probes[g]];
  };
  // Every probe, once: a probed group waits for all of them, so its batches (and the cache's
  // entries, which hold a batch's text) never depend on which compile happened to finish first.
  std::vector<std::size_t> probe_list;
  for (std::size_t g = 0; g < groups.size(); ++g)
    if (const auto p = probe_of(g);
        p != npos && std::find(probe_list.begin(), probe_list.end(), p) == probe_list.end())
      probe_list.push_back(p);
  std::size_t batch_files = 0;
  // Group g's members from `from` in batches of `size`, in order.
  auto batches_of = [&](const std::vector<std::size_t>& members, std::size_t size) {
    std::vector<job> out;
    for (std::size_t from = 0; from < members.size(); from += size) {
      job j;
      for (std::size_t i = from; i < std::min(members.size(), from + size); ++i) {
        j.members.push_back(members[i]);
        std::error_code ec;
        const auto n = fs::file_size(flat[members[i]], ec);
        j.bytes += ec ? 0 : n;
      }
      if (j.members.size() > 1) j.batch = batch_files++;
      out.push_back(std::move(j));
    }
    return out;
  };
  std::deque<job> singles;
  std::vector<job> batches;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    std::vector<std::size_t> members(groups[g].size());
    for (std::size_t k = 0; k < members.size(); ++k)
      members[k] = first_of_group[g] + k;
    if (const auto p = probe_of(g); p != npos) {
      job j;
      j.members = std::move(members);
      j.probe = p;
      singles.push_back(std::move(j)); // (in the groups' place, as_given or not)
      continue;
    }
    for (auto& j : batches_of(members, batch_size))
      (j.members.size() == 1 || bo.as_given ? singles.emplace_back(std::move(j))
                                            : batches.emplace_back(std::move(j)));
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
  std::vector<char> known(flat.size(), 0); // out[i] is final
  auto probes_known = [&] {
    return std::all_of(probe_list.begin(), probe_list.end(),
                       [&](std::size_t p) { return known[p]; });
  };
  // nvcc's fixed cost: the fastest of the probes' compiles (all known by the time it is asked).
  auto cheapest = [&] {
    double c = 0;
    for (const auto p : probe_list)
      if (out[p].ok && out[p].nvcc_seconds > 0)
        c = c > 0 ? std::min(c, out[p].nvcc_seconds) : out[p].nvcc_seconds;
    return c;
  };
  std::mutex m;
  std::condition_variable cv;
  std::size_t running = 0; // jobs taken and not finished (a batch may put members back)
  auto finish = [&](std::size_t i, compile_result r) {
    out[i] = std::move(r);
    if (on_compiled) on_compiled(i, out[i]);
  };
  // The first job that can start now: any but a probed group while a probe is not known yet.
  auto ready = [&]() -> std::deque<job>::iterator {
    return std::find_if(queue.begin(), queue.end(),
                        [&](const job& j) { return j.probe == npos || probes_known(); });
  };
  auto body = [&] {
    std::unique_lock<std::mutex> l(m);
    for (;;) {
      cv.wait(l, [&] { return ready() != queue.end() || running == 0; });
      if (queue.empty() || (bo.cancel && *bo.cancel)) return;
      const auto it = ready();
      if (it == queue.end()) return; // (a probe that will never be known: nothing runs it)
      job j = std::move(*it);
      queue.erase(it);
      if (j.probe != npos) { // its probe is known: the group's batches, at the queue's front
        const auto size =
            probed_batch_size(out[j.probe].nvcc_seconds, cheapest(), bo.batch_seconds, batch_size);
        auto made = batches_of(j.members, size);
        for (auto b = made.rbegin(); b != made.rend(); ++b)
          queue.push_front(std::move(*b));
        cv.notify_all();
        continue;
      }
      ++running;
      l.unlock();
      std::vector<job> back; // the members of a batch that did not make it, each alone
      std::vector<std::pair<std::size_t, compile_result>> done;
      if (j.members.size() == 1) {
        done.emplace_back(j.members[0], compile_candidate(flat[j.members[0]], opt));
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
            done.emplace_back(j.members[k], std::move(each));
          }
        } else {
          for (const auto i : j.members)
            back.push_back({{i}, 0, 0});
        }
      }
      for (auto& [i, r] : done)
        finish(i, std::move(r));
      l.lock();
      for (const auto& [i, r] : done)
        known[i] = 1;
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
