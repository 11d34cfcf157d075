// A small tokenizer for CUDA C++ source, enough for source-level mutation (mutants/
// mutation_rules.h): every token keeps its byte offset, length, line and column, so a mutant is a
// byte range of the original file and its replacement. Comments, string and character literals
// and preprocessor lines are tokens of their own kinds, which no mutation rule touches.
//
// Punctuators are read longest first. The kernel launch brackets `<<<` and `>>>` are one token
// each (never a shift, never mutated); `>>` and `<<` are shift tokens (a rule that pairs
// template brackets treats a `>>` closing two of them as such); `->`, `::`, `++`, `+=`, `>>=`,
// `...` and the other multi-character operators are one token each. Numbers are read as
// preprocessing numbers: 1.0f, 1e-5f, 0x7fffffff, 32u, 0x1p-3f are one token.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace kg {

enum class token_kind {
  identifier,     // names and keywords
  number,         // integer and floating literals with their suffixes
  string_literal, // "...", R"d(...)d", with any encoding prefix
  char_literal,   // 'x', u8'x', ...
  punctuator,     // operators and punctuation
  preprocessor,   // a whole directive line, continuation lines included
  comment,        // // ... and /* ... */
};

struct token {
  token_kind kind = token_kind::punctuator;
  std::size_t offset = 0, length = 0; // bytes in the source
  int line = 1, column = 1;           // 1-based; columns count bytes
  std::string_view text;              // a view into the source given to lex_cuda
};

// The tokens of `source` in order (whitespace dropped). Never throws: an unterminated comment or
// literal runs to the end of the source, a byte that starts no token is a one-byte punctuator.
// The views point into `source`, which must outlive them.
std::vector<token> lex_cuda(std::string_view source);

// True for the kinds mutation rules may touch (not comments, literals or preprocessor lines).
bool is_code(const token& t);

} // namespace kg
