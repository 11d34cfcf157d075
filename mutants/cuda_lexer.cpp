#include "mutants/cuda_lexer.h"

#include <array>
#include <string>

namespace kg {
namespace {

bool ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' ||
         static_cast<unsigned char>(c) >= 0x80;
}

bool ident_char(char c) {
  return ident_start(c) || (c >= '0' && c <= '9');
}

bool digit(char c) {
  return c >= '0' && c <= '9';
}

// Longest first: the launch brackets before the shifts, three characters before two.
constexpr std::array<std::string_view, 29> multi = {
    "<<<", ">>>", "<<=", ">>=", "<=>", "->*", "...", "->", "::", "++", "--", "+=", "-=", "*=", "/=",
    "%=",  "&=",  "|=",  "^=",  "<<",  ">>",  "<=",  ">=", "==", "!=", "&&", "||", ".*", "##"};

class lexer {
public:
  explicit lexer(std::string_view s) : s_(s) {}

  std::vector<token> run() {
    std::vector<token> out;
    bool line_start = true; // only whitespace so far on this line
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == '\n') {
        advance(1);
        line_start = true;
        continue;
      }
      if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
        advance(1);
        continue;
      }
      if (c == '\\' && pos_ + 1 < s_.size() && s_[pos_ + 1] == '\n') { // a line splice
        advance(2);
        continue;
      }
      const std::size_t start = pos_;
      const int line = line_, column = column_;
      token_kind kind = token_kind::punctuator;
      if (c == '#' && line_start) {
        kind = token_kind::preprocessor;
        directive();
      } else if (c == '/' && peek(1) == '/') {
        kind = token_kind::comment;
        while (pos_ < s_.size() && s_[pos_] != '\n') {
          if (s_[pos_] == '\\' && peek(1) == '\n') advance(1); // a spliced line comment
          advance(1);
        }
      } else if (c == '/' && peek(1) == '*') {
        kind = token_kind::comment;
        advance(2);
        while (pos_ < s_.size() && !(s_[pos_] == '*' && peek(1) == '/'))
          advance(1);
        advance(pos_ < s_.size() ? 2 : 0);
      } else if (const std::size_t p = literal_prefix(); p != std::string_view::npos) {
        const char q = s_[pos_ + p];
        kind = q == '\'' ? token_kind::char_literal : token_kind::string_literal;
        const bool raw = p > 0 && s_[pos_ + p - 1] == 'R';
        advance(p);
        raw ? raw_string() : quoted(q);
      } else if (ident_start(c)) {
        kind = token_kind::identifier;
        while (pos_ < s_.size() && ident_char(s_[pos_]))
          advance(1);
      } else if (digit(c) || (c == '.' && digit(peek(1)))) {
        kind = token_kind::number;
        number();
      } else {
        std::size_t n = 1;
        for (auto m : multi)
          if (s_.substr(pos_, m.size()) == m) {
            n = m.size();
            break;
          }
        advance(n);
      }
      line_start = false;
      if (kind == token_kind::preprocessor) line_start = true; // (it ended at a newline)
      out.push_back({kind, start, pos_ - start, line, column, s_.substr(start, pos_ - start)});
    }
    return out;
  }

private:
  std::string_view s_;
  std::size_t pos_ = 0;
  int line_ = 1, column_ = 1;

  char peek(std::size_t k) const { return pos_ + k < s_.size() ? s_[pos_ + k] : '\0'; }

  void advance(std::size_t n) {
    for (std::size_t k = 0; k < n && pos_ < s_.size(); ++k, ++pos_) {
      if (s_[pos_] == '\n') {
        ++line_;
        column_ = 1;
      } else {
        ++column_;
      }
    }
  }

  // A directive runs to the end of its line; a backslash-newline continues it. A comment that
  // starts on the line is part of it (never mutated either way).
  void directive() {
    while (pos_ < s_.size() && s_[pos_] != '\n') {
      if (s_[pos_] == '\\' && peek(1) == '\n')
        advance(1);
      else if (s_[pos_] == '/' && peek(1) == '*') {
        advance(2);
        while (pos_ < s_.size() && !(s_[pos_] == '*' && peek(1) == '/'))
          advance(1);
        advance(pos_ < s_.size() ? 1 : 0);
      }
      advance(1);
    }
  }

  // The length of an encoding prefix (u8, u, U, L, each optionally followed by R, or R alone)
  // when a string or character literal starts here; npos otherwise.
  std::size_t literal_prefix() const {
    if (s_[pos_] == '"' || s_[pos_] == '\'') return 0;
    for (std::string_view p : {"u8R", "uR", "UR", "LR", "u8", "u", "U", "L", "R"}) {
      if (s_.substr(pos_, p.size()) != p) continue;
      const char q = peek(p.size());
      if (q == '"' || (q == '\'' && p.back() != 'R')) return p.size();
    }
    return std::string_view::npos;
  }

  void quoted(char q) {
    advance(1);
    while (pos_ < s_.size() && s_[pos_] != q && s_[pos_] != '\n') {
      if (s_[pos_] == '\\') advance(1);
      advance(1);
    }
    if (pos_ < s_.size() && s_[pos_] == q) advance(1);
  }

  // R"delim( ... )delim"
  void raw_string() {
    advance(1); // "
    const std::size_t d0 = pos_;
    while (pos_ < s_.size() && s_[pos_] != '(' && s_[pos_] != '\n')
      advance(1);
    const std::string close = ")" + std::string(s_.substr(d0, pos_ - d0)) + "\"";
    const std::size_t end = s_.find(close, pos_);
    advance(end == std::string_view::npos ? s_.size() - pos_ : end + close.size() - pos_);
  }

  // A preprocessing number: digits, letters, '.', digit separators, and a sign right after an
  // exponent letter (e/E, or p/P in a hex literal).
  void number() {
    const bool hex = s_[pos_] == '0' && (peek(1) == 'x' || peek(1) == 'X');
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if ((c == '+' || c == '-') && pos_ > 0) {
        const char e = s_[pos_ - 1];
        const bool exponent = hex ? (e == 'p' || e == 'P') : (e == 'e' || e == 'E');
        if (!exponent) break;
        advance(1);
        continue;
      }
      if (c == '\'' && ident_char(peek(1))) { // 1'000'000
        advance(1);
        continue;
      }
      if (!ident_char(c) && c != '.') break;
      advance(1);
    }
  }
};

} // namespace

std::vector<token> lex_cuda(std::string_view source) {
  return lexer(source).run();
}

bool is_code(const token& t) {
  return t.kind == token_kind::identifier || t.kind == token_kind::number ||
         t.kind == token_kind::punctuator;
}

} // namespace kg
