// lint.layers: every `#include "folder/..."` of the tree points down the layer list of
// docs/architecture.md ("## Layers": numbered lines naming `folder/`, lowest first). A file of a
// layer may include its own folder's headers and those of layers listed before it; an include of
// a later layer is reported as FILE:LINE and fails the run (exit 1). Includes of folders not in the
// list (the build's generated/, system headers) are not the lint's business.
//
//   kg_lint_layers ROOT [DOC]   (DOC defaults to ROOT/docs/architecture.md)
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

// The numbered list under "## Layers", in order.
std::map<std::string, int> read_layers(const fs::path& doc) {
  std::ifstream in(doc);
  std::map<std::string, int> rank;
  const std::regex item(R"(^\s*(\d+)\.\s+`([A-Za-z0-9_]+)/`)");
  bool in_section = false;
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0) {
      if (in_section) break;
      in_section = line == "## Layers";
      continue;
    }
    std::smatch m;
    if (in_section && std::regex_search(line, m, item)) rank[m[2]] = ++n;
  }
  return rank;
}

bool source_file(const fs::path& p) {
  static const std::vector<std::string> ext = {".h", ".hpp", ".cpp", ".cu", ".cuh", ".in"};
  for (const auto& e : ext)
    if (p.extension() == e) return true;
  return false;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: kg_lint_layers ROOT [DOC]\n";
    return 2;
  }
  const fs::path root = argv[1];
  const fs::path doc = argc > 2 ? fs::path(argv[2]) : root / "docs/architecture.md";
  const auto rank = read_layers(doc);
  if (rank.size() < 2) {
    std::cerr << "kg_lint_layers: no layer list under \"## Layers\" in " << doc << "\n";
    return 2;
  }
  const std::regex include(R"(^\s*#\s*include\s+"([A-Za-z0-9_]+)/)");
  int files = 0, includes = 0, wrong = 0;
  for (const auto& [folder, r] : rank) {
    const fs::path dir = root / folder;
    if (!fs::is_directory(dir)) continue;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      if (!e.is_regular_file() || !source_file(e.path())) continue;
      ++files;
      std::ifstream in(e.path());
      int line_no = 0;
      for (std::string line; std::getline(in, line);) {
        ++line_no;
        std::smatch m;
        if (!std::regex_search(line, m, include)) continue;
        const auto to = rank.find(m[1]);
        if (to == rank.end()) continue;
        ++includes;
        if (to->second > r) {
          ++wrong;
          std::cout << fs::relative(e.path(), root).string() << ":" << line_no << ": " << folder
                    << "/ (layer " << r << ") includes " << to->first << "/ (layer " << to->second
                    << "), a layer above it in " << doc.filename().string() << "\n";
        }
      }
    }
  }
  std::cout << files << " files, " << includes << " includes between layers checked, " << wrong
            << " against the order\n";
  return wrong == 0 ? 0 : 1;
}
