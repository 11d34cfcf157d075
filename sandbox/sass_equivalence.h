// Equivalent mutants by machine code: a mutant whose site lies in device-only code (the bodies of
// __global__ and __device__ functions not also __host__: mutants/mutation_rules.h) and whose
// cubin equals the original's cannot behave differently, so it is marked equivalent without being
// run. A site in host code (the launch arithmetic) is never judged this way: host code is not in
// the cubin. Both sources are compiled the way candidates are (-O3, sm_90a, the ABI headers) to a
// cubin under one file name, and compared by a digest of every ELF section -- name, type, flags,
// size and bytes -- but the toolkit's note (.note.nv.tkinfo, which names the tools).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace kg {

// SHA-256 hex of a cubin's sections (above). Throws std::invalid_argument for bytes that are not a
// little-endian 64-bit ELF with its section headers inside the file.
std::string cubin_code_digest(std::string_view elf);

// Compiles `source` in `workdir` (created; kernel.cu, kernel.cubin, compile.log there) and returns
// the cubin's digest, or nullopt when nvcc fails (its log in compile.log).
std::optional<std::string> compile_cubin_digest(const std::string& source,
                                                const std::filesystem::path& workdir,
                                                double timeout_seconds = 300);

// Whether the byte at `offset` of `source` is device-only code.
bool in_device_only_code(std::string_view source, std::size_t offset);

} // namespace kg
