#include "sandbox/candidate_batch.h"

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

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
                                               const compile_options& opt, std::size_t batch_size) {
  struct batch {
    std::vector<std::size_t> members; // indices into the flat result list
    fs::path file;
  };
  std::vector<fs::path> flat;
  std::vector<batch> batches;
  std::vector<std::size_t> alone; // compiled one call each
  fs::create_directories(batch_dir);
  for (const auto& g : groups) {
    for (std::size_t from = 0; from < g.size(); from += batch_size) {
      const std::size_t to = std::min(g.size(), from + batch_size);
      batch b;
      std::vector<std::string> texts;
      for (std::size_t i = from; i < to; ++i) {
        b.members.push_back(flat.size());
        flat.push_back(g[i]);
        texts.push_back(read_text(g[i]));
      }
      const auto tu = b.members.size() > 1 ? batch_translation_unit(texts) : std::nullopt;
      if (!tu) {
        alone.insert(alone.end(), b.members.begin(), b.members.end());
        continue;
      }
      b.file = batch_dir / ("batch-" + std::to_string(batches.size()) + ".cu");
      std::ofstream(b.file, std::ios::binary) << *tu;
      batches.push_back(std::move(b));
    }
  }
  std::vector<compile_result> out(flat.size());
  std::vector<fs::path> batch_files;
  for (const auto& b : batches)
    batch_files.push_back(b.file);
  const auto compiled = compile_candidates(batch_files, opt);
  for (std::size_t k = 0; k < batches.size(); ++k) {
    const auto& b = batches[k];
    if (!compiled[k].ok) {
      alone.insert(alone.end(), b.members.begin(), b.members.end());
      continue;
    }
    for (std::size_t j = 0; j < b.members.size(); ++j) {
      auto r = compiled[k];
      r.source = flat[b.members[j]];
      r.symbol = "kg_run_" + std::to_string(j);
      r.seconds = compiled[k].seconds / static_cast<double>(b.members.size());
      out[b.members[j]] = std::move(r);
    }
  }
  std::vector<fs::path> alone_files;
  for (const auto i : alone)
    alone_files.push_back(flat[i]);
  const auto singles = compile_candidates(alone_files, opt);
  for (std::size_t j = 0; j < alone.size(); ++j)
    out[alone[j]] = singles[j];
  return out;
}

} // namespace kg
