#include "sandbox/sass_equivalence.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "base/sha256.h"
#include "mutants/mutation_rules.h"
#include "sandbox/process.h"

namespace kg {

namespace {

template <typename T>
T read_le(std::string_view b, std::size_t at) {
  if (at + sizeof(T) > b.size()) throw std::invalid_argument("cubin: truncated ELF");
  T v{};
  std::memcpy(&v, b.data() + at, sizeof(T)); // x86-64 and the cubin are both little-endian
  return v;
}

} // namespace

std::string cubin_code_digest(std::string_view elf) {
  if (elf.size() < 64 ||
      elf.substr(0, 4) != "\x7f"
                          "ELF" ||
      elf[4] != 2 || elf[5] != 1)
    throw std::invalid_argument("cubin: not a little-endian 64-bit ELF");
  const auto shoff = read_le<std::uint64_t>(elf, 0x28);
  const auto shentsize = read_le<std::uint16_t>(elf, 0x3A);
  const auto shnum = read_le<std::uint16_t>(elf, 0x3C);
  const auto shstrndx = read_le<std::uint16_t>(elf, 0x3E);
  if (shentsize < 64 || shstrndx >= shnum)
    throw std::invalid_argument("cubin: malformed section header table");
  auto header = [&](std::size_t i) { return shoff + i * shentsize; };
  const auto names_at = read_le<std::uint64_t>(elf, header(shstrndx) + 0x18);
  // Sections by name, so their order in the file does not matter.
  std::map<std::string, std::string> sections;
  for (std::size_t i = 1; i < shnum; ++i) {
    const auto h = header(i);
    const auto name_off = read_le<std::uint32_t>(elf, h);
    const auto type = read_le<std::uint32_t>(elf, h + 4);
    const auto flags = read_le<std::uint64_t>(elf, h + 8);
    const auto offset = read_le<std::uint64_t>(elf, h + 0x18);
    const auto size = read_le<std::uint64_t>(elf, h + 0x20);
    if (names_at + name_off >= elf.size()) throw std::invalid_argument("cubin: bad section name");
    const std::string name(
        elf.data() + names_at + name_off,
        strnlen(elf.data() + names_at + name_off, elf.size() - names_at - name_off));
    if (name == ".note.nv.tkinfo") continue;
    constexpr std::uint32_t nobits = 8; // no bytes in the file: its size alone
    std::string bytes;
    if (type != nobits) {
      if (offset > elf.size() || size > elf.size() - offset)
        throw std::invalid_argument("cubin: section " + name + " runs past the file");
      bytes.assign(elf.data() + offset, size);
    }
    std::ostringstream key;
    key << type << ' ' << flags << ' ' << size << '\n';
    sections[name] += key.str() + bytes;
  }
  sha256 h;
  for (const auto& [name, body] : sections) {
    h.update(name.data(), name.size() + 1); // with its NUL: names cannot run into bodies
    h.update(body.data(), body.size());
  }
  return h.finish_hex();
}

std::optional<std::string> compile_cubin_digest(const std::string& source,
                                                const std::filesystem::path& workdir,
                                                double timeout_seconds) {
  namespace fs = std::filesystem;
  fs::create_directories(workdir);
  std::ofstream(workdir / "kernel.cu", std::ios::binary) << source;
  std::error_code ec;
  fs::remove(workdir / "kernel.cubin", ec);
  fs::remove(workdir / "compile.log", ec);
  const auto p =
      run_process({KG_NVCC, "-cubin", "-O3", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a",
                   "-I" KG_ABI_DIR, "-o", (workdir / "kernel.cubin").string(),
                   (workdir / "kernel.cu").string()},
                  workdir / "compile.log", {.timeout_seconds = timeout_seconds});
  if (!p.exited || p.exit_code != 0 || !fs::exists(workdir / "kernel.cubin", ec))
    return std::nullopt;
  std::ifstream in(workdir / "kernel.cubin", std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return cubin_code_digest(bytes.str());
}

bool in_device_only_code(std::string_view source, std::size_t offset) {
  for (const auto& [begin, end] : device_only_code(source))
    if (offset >= begin && offset < end) return true;
  return false;
}

} // namespace kg
