// The source-level mutation rules for CUDA kernels: each rule reads the token stream of one file
// (mutants/cuda_lexer.h) and yields the sites where it applies, each a contiguous byte range of
// the file and the text that replaces it. The rules are grouped in seven fault families:
//
//   arithmetic       operator swaps, floating constants perturbed
//   precision        an accumulator rounded to bf16, a float cast dropped, fast-math intrinsics,
//                    double computed in float
//   indexing         a subscript off by one, its operands swapped, block and thread indices
//                    (or block and grid sizes) swapped
//   boundary         < <= > >= moved by one, a guard's bound cut short, a guard removed
//   synchronization  __syncthreads / __syncwarp / a shuffle dropped, a partial shuffle mask
//   structural       a loop's first or last iteration skipped, an early return, a reduction step
//                    dropped
//   parameter_use    weight / bias / eps omitted, read at [0], or applied twice (the affine
//                    family of mutants/affine_formula.h, found by parameter names)
//
// Arithmetic rules, float_constant_perturb and double_to_float apply anywhere in code (the host
// launch arithmetic of kg_run included); every other rule applies only inside the bodies of
// __global__ and __device__ functions. Comments, string literals and preprocessor lines are
// never touched, and a site's replacement never equals its original text. The heuristics are
// lexical: a small share of mutants may not compile, which the compile phase records.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kg {

struct mutation_site {
  std::string rule, family;
  std::size_t offset = 0, length = 0; // the replaced bytes of the source
  std::string original, replacement;  // original == source.substr(offset, length)
  int line = 0, column = 0;           // of offset, 1-based (columns in bytes)
};

struct mutation_rule_info {
  std::string_view name;    // stable id, lower_snake_case
  std::string_view family;  // one of mutation_family_names()
  std::string_view summary; // one line: what the rule does
};

// The seven families, in a fixed order.
std::span<const std::string_view> mutation_family_names();
// Every rule, grouped by family in that order.
std::span<const mutation_rule_info> mutation_rules();

// Every site of every rule in `source`, ordered by offset, then rule name.
std::vector<mutation_site> find_mutation_sites(std::string_view source);

// The byte ranges [begin, end) of the bodies of __global__ and __device__ functions that are not
// also __host__, ordered by offset: code that exists only in the device binary (a mutant there
// can be judged by its machine code; one in host code cannot).
std::vector<std::pair<std::size_t, std::size_t>> device_only_code(std::string_view source);

} // namespace kg
