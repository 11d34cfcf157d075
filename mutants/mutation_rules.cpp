#include "mutants/mutation_rules.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <set>
#include <string>
#include <tuple>

#include "mutants/cuda_lexer.h"

namespace kg {
namespace {

constexpr std::array<std::string_view, 7> families = {
    "arithmetic",      "precision",  "indexing",     "boundary",
    "synchronization", "structural", "parameter_use"};

constexpr mutation_rule_info rules[] = {
    {"binary_plus_to_minus", "arithmetic", "a binary + becomes -"},
    {"binary_minus_to_plus", "arithmetic", "a binary - becomes +"},
    {"mul_to_div", "arithmetic", "a binary * becomes /"},
    {"div_to_mul", "arithmetic", "a / becomes *"},
    {"compound_add_to_sub", "arithmetic", "+= becomes -="},
    {"float_constant_perturb", "arithmetic",
     "a nonzero floating literal c becomes c * 1.001, in its own suffix style"},
    {"float_accumulator_to_bf16_rounding", "precision",
     "NAME += E on a float accumulator rounds the sum to bf16 precision (mantissa truncated)"},
    {"drop_float_cast", "precision",
     "static_cast<float>(X), float(X) or (float)X loses its cast to float"},
    {"fast_math_intrinsic", "precision",
     "expf, logf, sinf, cosf, tanf, powf, tanhf, ... become their fast __ intrinsics"},
    {"double_to_float", "precision", "a double type becomes float"},
    {"index_plus_one", "indexing", "a subscript [E] becomes [(E) + 1]"},
    {"index_minus_one", "indexing", "a subscript [E] becomes [(E) - 1]"},
    {"index_operands_swap", "indexing", "[A * B + C] becomes [C * B + A] (and [A + B * C])"},
    {"thread_block_index_swap", "indexing", "blockIdx.D and threadIdx.D trade places"},
    {"grid_block_dim_swap", "indexing", "blockDim.D and gridDim.D trade places (a stride swap)"},
    {"lt_to_le", "boundary", "< becomes <="},
    {"le_to_lt", "boundary", "<= becomes <"},
    {"gt_to_ge", "boundary", "> becomes >="},
    {"ge_to_gt", "boundary", ">= becomes >"},
    {"tail_skip", "boundary", "the bound N of an if guard I < N becomes (N) - 1"},
    {"guard_removal", "boundary",
     "if (C) return/continue/break; is removed; another one-statement if (C) becomes if (true)"},
    {"drop_syncthreads", "synchronization", "__syncthreads(); becomes ;"},
    {"drop_syncwarp", "synchronization", "__syncwarp(...); becomes ;"},
    {"drop_shuffle", "synchronization", "__shfl_*_sync(M, V, O) becomes (V)"},
    {"wrong_shuffle_mask", "synchronization",
     "a full mask 0xffffffff as a shuffle's or vote's first argument becomes 0x0000ffffu"},
    {"skip_first_iteration", "structural",
     "an increasing loop's start A becomes (A) + 1 (a decreasing one's (A) - 1)"},
    {"skip_last_iteration", "structural",
     "a loop condition I < N becomes I < (N) - 1 (I > N: I > (N) + 1)"},
    {"early_return", "structural", "a __global__ function returns before its first statement"},
    {"drop_reduction_step", "structural",
     "a halving (doubling) reduction loop starts at half (twice) its first offset"},
    {"omit_weight", "parameter_use", "a weight factor * W[i] is removed"},
    {"omit_bias", "parameter_use", "a bias term + B[i] is removed"},
    {"omit_eps", "parameter_use", "+ eps (or a small literal epsilon) is removed"},
    {"scalar_instead_of_per_channel", "parameter_use", "W[i] or B[i] becomes W[0] or B[0]"},
    {"apply_weight_twice", "parameter_use", "a weight factor W[i] becomes W[i] * W[i]"},
    {"apply_bias_twice", "parameter_use", "a bias term + B[i] becomes + B[i] + B[i]"},
    {"apply_before_normalization", "parameter_use",
     "the affine (* W[i], + B[i]) moves from the normalized value to the input read it normalizes"},
};

std::string_view family_of(std::string_view rule) {
  for (const auto& r : rules)
    if (r.name == rule) return r.family;
  return "";
}

// --- word lists -----------------------------------------------------------------------------

// Built-in, CUDA and ABI type names (CUDA's vector types float4, uint2, ... included).
const std::set<std::string, std::less<>>& builtin_types() {
  static const std::set<std::string, std::less<>> s = [] {
    std::set<std::string, std::less<>> t = {
        "void",      "bool",          "char",           "short",        "int",          "long",
        "float",     "double",        "signed",         "unsigned",     "auto",         "wchar_t",
        "char8_t",   "char16_t",      "char32_t",       "half",         "half2",        "__half",
        "__half2",   "__nv_bfloat16", "__nv_bfloat162", "nv_bfloat16",  "nv_bfloat162", "dim3",
        "kg_tensor", "__nv_fp8_e4m3", "__nv_fp8_e5m2",  "cudaStream_t", "cudaError_t",  "size_t"};
    for (const char* b : {"char", "uchar", "short", "ushort", "int", "uint", "long", "ulong",
                          "longlong", "ulonglong", "float", "double"})
      for (int n = 1; n <= 4; ++n)
        t.insert(std::string(b) + std::to_string(n));
    return t;
  }();
  return s;
}

bool one_of(std::string_view s, std::initializer_list<std::string_view> words) {
  return std::find(words.begin(), words.end(), s) != words.end();
}

// Declaration words that are not types.
bool qualifier(std::string_view s) {
  return one_of(s, {"const",        "constexpr",    "static",       "volatile",
                    "__shared__",   "__constant__", "__device__",   "__managed__",
                    "register",     "extern",       "inline",       "__forceinline__",
                    "__restrict__", "mutable",      "thread_local", "__host__",
                    "__global__",   "__noinline__", "typename",     "struct",
                    "class",        "union"});
}

// Keywords after which + - * are unary and [ is not a subscript.
bool operator_keyword(std::string_view s) {
  return one_of(s,
                {"return",        "case",      "else",     "do",    "throw",   "sizeof",   "new",
                 "delete",        "co_return", "co_yield", "goto",  "alignof", "decltype", "typeid",
                 "static_assert", "if",        "for",      "while", "switch",  "operator"}) ||
         qualifier(s);
}

bool control_word(std::string_view s) {
  return one_of(s, {"if", "for", "while", "switch", "catch", "return", "sizeof", "alignof",
                    "decltype", "__launch_bounds__", "__align__", "alignas", "static_assert",
                    "__attribute__", "__declspec", "defined"});
}

bool cast_word(std::string_view s) {
  return one_of(s, {"static_cast", "reinterpret_cast", "const_cast", "dynamic_cast", "bit_cast"});
}

// Parameter names that play the affine roles (the affine family of mutants/affine_formula.h).
bool weight_name(std::string_view s) {
  return one_of(s, {"w", "weight", "weights", "gamma", "scale", "scales", "wt", "norm_weight",
                    "ln_weight", "ln_w", "rms_weight", "qw", "kw", "q_weight", "k_weight", "q_norm",
                    "k_norm"});
}
bool bias_name(std::string_view s) {
  return one_of(s, {"b", "bias", "biases", "beta", "shift", "ln_bias", "ln_b", "norm_bias"});
}
bool eps_name(std::string_view s) {
  return one_of(s, {"eps", "epsilon", "eps_", "kEps", "kEpsilon", "EPS", "EPSILON",
                    "variance_epsilon", "norm_eps", "rms_eps", "ln_eps"});
}

// --- literals ---------------------------------------------------------------------------------

// A nonzero decimal floating literal times 1.001, computed exactly in decimal and written with
// the same exponent and suffix: 0.5f -> 0.5005f, 1e-5f -> 1.001e-5f, 2.0 -> 2.002. Empty for an
// integer, a hex literal or zero.
std::string perturbed_float(std::string_view lit) {
  if (lit.size() > 1 && lit[0] == '0' && (lit[1] == 'x' || lit[1] == 'X')) return "";
  std::size_t k = lit.size();
  while (k > 0 && one_of(lit.substr(k - 1, 1), {"f", "F", "l", "L"}))
    --k;
  if (lit.size() - k > 1) return ""; // (no such suffix)
  const std::string_view body = lit.substr(0, k), suffix = lit.substr(k);
  const std::size_t e = body.find_first_of("eE");
  const std::string_view mant = body.substr(0, e);
  const std::string_view expo = e == std::string_view::npos ? "" : body.substr(e);
  const std::size_t dot = mant.find('.');
  if (dot == std::string_view::npos && expo.empty()) return ""; // an integer
  std::string digits;
  for (char c : mant)
    if (c >= '0' && c <= '9')
      digits += c;
    else if (c != '.')
      return "";
  if (digits.empty() || std::count(mant.begin(), mant.end(), '.') > 1) return "";
  for (std::size_t j = 1; j < expo.size(); ++j)
    if (!((expo[j] >= '0' && expo[j] <= '9') || (j == 1 && (expo[j] == '+' || expo[j] == '-'))))
      return "";
  if (digits.find_first_not_of('0') == std::string::npos) return ""; // zero
  const std::size_t decimals = dot == std::string_view::npos ? 0 : mant.size() - dot - 1;
  // digits * 1001 = digits * 1000 + digits, then 3 more decimals.
  std::string a = digits + "000", b = std::string(3, '0') + digits, sum(a.size() + 1, '0');
  int carry = 0;
  for (std::size_t j = a.size(); j-- > 0;) {
    const int d = (a[j] - '0') + (b[j] - '0') + carry;
    sum[j + 1] = static_cast<char>('0' + d % 10);
    carry = d / 10;
  }
  sum[0] = static_cast<char>('0' + carry);
  const std::size_t frac = decimals + 3;
  if (sum.size() <= frac) sum.insert(0, frac + 1 - sum.size(), '0');
  std::string whole = sum.substr(0, sum.size() - frac), fraction = sum.substr(sum.size() - frac);
  whole.erase(0, std::min(whole.find_first_not_of('0'), whole.size() - 1));
  while (fraction.size() > 1 && fraction.back() == '0')
    fraction.pop_back();
  return whole + "." + fraction + std::string(expo) + std::string(suffix);
}

// The value of a decimal floating literal (its suffix ignored); 0 if it is not one.
double literal_value(std::string_view lit) {
  if (perturbed_float(lit).empty()) return 0;
  while (!lit.empty() && one_of(lit.substr(lit.size() - 1), {"f", "F", "l", "L"}))
    lit.remove_suffix(1);
  double v = 0;
  std::from_chars(lit.data(), lit.data() + lit.size(), v);
  return v;
}

// The value of a decimal integer literal (suffixes u, l allowed); -1 if it is not one.
long long integer_value(std::string_view lit, std::string* suffix = nullptr) {
  std::size_t k = 0;
  long long v = 0;
  while (k < lit.size() && lit[k] >= '0' && lit[k] <= '9' && k < 15)
    v = v * 10 + (lit[k++] - '0');
  if (k == 0 || (lit[0] == '0' && k > 1)) return -1; // (octal)
  for (std::size_t j = k; j < lit.size(); ++j)
    if (!one_of(lit.substr(j, 1), {"u", "U", "l", "L"})) return -1;
  if (suffix) *suffix = std::string(lit.substr(k));
  return v;
}

bool full_mask(std::string_view lit) {
  std::string s;
  for (char c : lit)
    s += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s == "0xffffffff" || s == "0xffffffffu";
}

// --- the analysis of one file -------------------------------------------------------------------

struct function_info {
  int body_open = -1, body_close = -1;
  bool global = false;
  bool host = false; // also __host__: its body is compiled for the host too
  std::set<std::string, std::less<>> pointer_params, float_params;
};

class analysis {
public:
  explicit analysis(std::string_view src) : src_(src) {
    for (const auto& k : lex_cuda(src))
      if (k.kind != token_kind::comment && k.kind != token_kind::preprocessor) t_.push_back(k);
    line_starts_.push_back(0);
    for (std::size_t k = 0; k < src.size(); ++k)
      if (src[k] == '\n') line_starts_.push_back(k + 1);
    match_brackets();
    collect_types();
    pair_templates(true);
    collect_templates();
    pair_templates(false);
    find_functions();
    mark_excluded();
  }

  // The byte ranges of device-only function bodies, '{' to '}' inclusive.
  std::vector<std::pair<std::size_t, std::size_t>> device_only_bodies() const {
    std::vector<std::pair<std::size_t, std::size_t>> out;
    for (const auto& f : fns_)
      if (!f.host && f.body_close > f.body_open)
        out.emplace_back(t_[static_cast<std::size_t>(f.body_open)].offset,
                         t_[static_cast<std::size_t>(f.body_close)].offset + 1);
    return out;
  }

  std::vector<mutation_site> run() {
    arithmetic();
    precision();
    indexing();
    boundary();
    synchronization();
    structural();
    parameter_use();
    std::sort(sites_.begin(), sites_.end(), [](const auto& a, const auto& b) {
      return a.offset != b.offset ? a.offset < b.offset : a.rule < b.rule;
    });
    return std::move(sites_);
  }

private:
  std::string_view src_;
  std::vector<token> t_; // code tokens and literals (no comments, no preprocessor lines)
  std::vector<std::size_t> line_starts_;
  std::vector<int> match_;     // ( [ { and their closers, paired; -1 unpaired
  std::vector<int> enclosing_; // the innermost open ( [ { around a token; -1 at file scope
  std::vector<int> tmatch_;    // template brackets, paired
  std::vector<int> func_;      // the device function whose body holds the token; -1 if none
  std::vector<char> excluded_; // inside template arguments, static_assert, __launch_bounds__...
  std::vector<function_info> fns_;
  std::set<std::string, std::less<>> types_, templates_;
  std::vector<mutation_site> sites_;

  int n() const { return static_cast<int>(t_.size()); }
  std::string_view tx(int i) const { return i >= 0 && i < n() ? t_[i].text : std::string_view(); }
  bool ident(int i) const { return i >= 0 && i < n() && t_[i].kind == token_kind::identifier; }
  bool punct(int i, std::string_view s) const {
    return i >= 0 && i < n() && t_[i].kind == token_kind::punctuator && t_[i].text == s;
  }
  bool device(int i) const { return i >= 0 && i < n() && func_[i] >= 0; }
  bool tmpl(int i) const { return i >= 0 && i < n() && tmatch_[i] >= 0; }
  std::size_t begin(int i) const { return t_[i].offset; }
  std::size_t end(int i) const { return t_[i].offset + t_[i].length; }
  // The source text of tokens [a, b).
  std::string text(int a, int b) const {
    return b <= a ? std::string() : std::string(src_.substr(begin(a), end(b - 1) - begin(a)));
  }

  bool is_type(int i) const {
    if (!ident(i)) return false;
    const auto s = tx(i);
    return builtin_types().count(s) || types_.count(s) ||
           (s.size() > 2 && s.substr(s.size() - 2) == "_t");
  }

  void emit(std::string_view rule, std::size_t offset, std::size_t stop, std::string replacement) {
    std::string original(src_.substr(offset, stop - offset));
    if (original == replacement || stop <= offset) return;
    const auto line = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    mutation_site s;
    s.rule = std::string(rule);
    s.family = std::string(family_of(rule));
    s.offset = offset;
    s.length = stop - offset;
    s.original = std::move(original);
    s.replacement = std::move(replacement);
    s.line = static_cast<int>(line - line_starts_.begin());
    s.column = static_cast<int>(offset - *(line - 1)) + 1;
    sites_.push_back(std::move(s));
  }
  // Tokens [a, b) removed with the blanks before them (x * w[c] -> x, not "x ").
  void remove_tokens(std::string_view rule, int a, int b) {
    std::size_t from = begin(a);
    while (from > 0 && (src_[from - 1] == ' ' || src_[from - 1] == '\t'))
      --from;
    emit(rule, from, end(b - 1), "");
  }
  // Tokens [a, b) replaced.
  void emit_tokens(std::string_view rule, int a, int b, std::string replacement) {
    emit(rule, begin(a), end(b - 1), std::move(replacement));
  }

  // --- structure ---

  void match_brackets() {
    match_.assign(t_.size(), -1);
    enclosing_.assign(t_.size(), -1);
    std::vector<int> open;
    for (int i = 0; i < n(); ++i) {
      enclosing_[i] = open.empty() ? -1 : open.back();
      if (t_[i].kind != token_kind::punctuator) continue;
      const auto s = tx(i);
      if (s == "(" || s == "[" || s == "{") {
        open.push_back(i);
      } else if (s == ")" || s == "]" || s == "}") {
        const char want = s == ")" ? '(' : s == "]" ? '[' : '{';
        // An unbalanced closer pairs with the nearest opener of its kind; those between are
        // left unpaired.
        auto it = std::find_if(open.rbegin(), open.rend(), [&](int o) { return tx(o)[0] == want; });
        if (it == open.rend()) continue;
        const int o = *it;
        open.erase(std::next(it).base(), open.end());
        match_[o] = i;
        match_[i] = o;
        enclosing_[i] = open.empty() ? -1 : open.back();
      }
    }
  }

  // Type names the file declares: struct/class/union/enum names, using aliases, typedefs and
  // template type parameters.
  void collect_types() {
    for (int i = 0; i + 1 < n(); ++i) {
      const auto s = tx(i);
      if (one_of(s, {"struct", "class", "union", "enum", "typename"}) && ident(i + 1)) {
        int k = i + 1;
        if (tx(k) == "class" || tx(k) == "struct") ++k; // enum class X
        if (ident(k) && !qualifier(tx(k))) types_.insert(std::string(tx(k)));
      } else if (s == "using" && ident(i + 1) && punct(i + 2, "=")) {
        types_.insert(std::string(tx(i + 1)));
      } else if (s == "typedef") {
        int k = i + 1;
        while (k < n() && !punct(k, ";")) {
          if (punct(k, "{") && match_[k] > 0) k = match_[k];
          ++k;
        }
        if (ident(k - 1)) types_.insert(std::string(tx(k - 1)));
      }
    }
  }

  bool known_template(int p) const {
    if (!ident(p)) return false;
    const auto s = tx(p);
    return s == "template" || cast_word(s) || templates_.count(s) ||
           one_of(s, {"numeric_limits", "fragment", "vector", "array", "tuple", "pair", "span",
                      "min", "max", "is_same_v", "conditional_t", "enable_if_t"}) ||
           punct(p - 1, "::");
  }

  // Pairs a `<` with its `>` when it opens template arguments (a cast, `template <`, a name the
  // file declares as a template, a qualified name, or a type right after it); else comparisons.
  void pair_templates(bool only_headers) {
    if (tmatch_.empty()) tmatch_.assign(t_.size(), -1);
    for (int i = 1; i < n(); ++i) {
      if (!punct(i, "<") || tmpl(i) || !ident(i - 1)) continue;
      if (only_headers ? tx(i - 1) != "template"
                       : !(known_template(i - 1) || is_type(i + 1) || tx(i + 1) == "typename" ||
                           tx(i + 1) == "class"))
        continue;
      int depth = 1, close = -1;
      for (int j = i + 1; j < n() && j < i + 256 && close < 0; ++j) {
        const auto s = tx(j);
        if (t_[j].kind != token_kind::punctuator) continue;
        if (s == "(" || s == "[") {
          if (match_[j] < 0) break;
          j = match_[j];
        } else if (s == "<" && known_template(j - 1)) {
          ++depth;
        } else if (s == ">") {
          if (--depth == 0) close = j;
        } else if (s == ">>") {
          depth -= 2;
          if (depth <= 0) close = j;
        } else if (one_of(s, {";", "{", "}", ")", "]", "&&", "||", "=", "<<<", "?"})) {
          break;
        }
      }
      if (close < 0) continue;
      tmatch_[i] = close;
      tmatch_[close] = i;
    }
  }

  // Names a `template <...>` header declares (functions, structs).
  void collect_templates() {
    for (int i = 0; i + 1 < n(); ++i) {
      if (tx(i) != "template" || !tmpl(i + 1)) continue;
      for (int k = tmatch_[i + 1] + 1; k < n(); ++k) {
        if (one_of(tx(k), {"struct", "class", "union"}) && ident(k + 1)) {
          templates_.insert(std::string(tx(k + 1)));
          break;
        }
        if (punct(k, "(")) {
          if (ident(k - 1) && !control_word(tx(k - 1))) {
            templates_.insert(std::string(tx(k - 1)));
            break;
          }
          if (match_[k] < 0) break;
          k = match_[k];
          continue;
        }
        if (punct(k, "{") || punct(k, ";")) break;
      }
    }
  }

  // __global__ and __device__ function definitions: their bodies and parameters.
  void find_functions() {
    func_.assign(t_.size(), -1);
    for (int b = 0; b < n(); ++b) {
      if (!punct(b, "{") || match_[b] < 0 || func_[b] >= 0) continue;
      int p = b - 1;
      while (ident(p) && one_of(tx(p), {"const", "noexcept", "override", "final", "mutable"}))
        --p;
      if (!punct(p, ")") || match_[p] <= 0) continue;
      const int open = match_[p];
      int name = open - 1;
      if (tmpl(name) && tx(name) == ">") name = tmatch_[name] - 1;
      if (!ident(name) || control_word(tx(name))) continue;
      bool global = false, dev = false, host = false;
      for (int q = name - 1; q >= 0 && q >= name - 80; --q) {
        const auto s = tx(q);
        if (punct(q, ";") || punct(q, "}") || punct(q, "{")) break;
        if (punct(q, ")") && match_[q] >= 0) {
          q = match_[q];
          continue;
        }
        if (tmpl(q) && tmatch_[q] < q) {
          q = tmatch_[q];
          continue;
        }
        global = global || s == "__global__";
        dev = dev || s == "__device__";
        host = host || s == "__host__";
      }
      if (!global && !dev) continue;
      function_info f;
      f.body_open = b;
      f.body_close = match_[b];
      f.global = global;
      f.host = host;
      read_params(open, p, f);
      const int id = static_cast<int>(fns_.size());
      fns_.push_back(std::move(f));
      for (int k = b + 1; k < match_[b]; ++k)
        func_[k] = id;
    }
  }

  void read_params(int open, int close, function_info& f) const {
    int a = open + 1;
    for (int k = open + 1; k <= close; ++k) {
      if ((punct(k, "(") || punct(k, "[")) && match_[k] > k && match_[k] < close) {
        k = match_[k];
        continue;
      }
      if (tmpl(k) && tmatch_[k] > k) {
        k = tmatch_[k];
        continue;
      }
      if (!(punct(k, ",") || k == close)) continue;
      int name = -1, stars = 0, words = 0;
      bool only_float = true;
      for (int j = a; j < k; ++j) {
        if (punct(j, "=")) break;
        if (punct(j, "[") && match_[j] > j) {
          ++stars;
          j = match_[j];
          continue;
        }
        if (punct(j, "*") || punct(j, "&")) ++stars;
        if (ident(j)) {
          if (name >= 0) {
            ++words;
            only_float = only_float && tx(name) == "float";
          }
          name = j;
        }
      }
      if (name >= 0 && !qualifier(tx(name)) && !is_type(name)) {
        if (stars > 0) f.pointer_params.insert(std::string(tx(name)));
        if (stars == 0 && words == 1 && only_float) f.float_params.insert(std::string(tx(name)));
      }
      a = k + 1;
    }
  }

  // Template arguments, static_assert, __launch_bounds__, alignment and sizeof operands are no
  // arithmetic of the kernel.
  void mark_excluded() {
    excluded_.assign(t_.size(), 0);
    for (int i = 0; i < n(); ++i) {
      if (tmpl(i) && tmatch_[i] > i)
        for (int k = i; k <= tmatch_[i]; ++k)
          excluded_[k] = 1;
      if (ident(i) &&
          one_of(tx(i), {"static_assert", "__launch_bounds__", "__align__", "alignas", "sizeof",
                         "alignof", "decltype", "__attribute__"}) &&
          punct(i + 1, "(") && match_[i + 1] > i)
        for (int k = i + 1; k <= match_[i + 1]; ++k)
          excluded_[k] = 1;
    }
  }

  // --- expression shapes ---

  // The end (exclusive) of the expression starting at token i: the first token at its own depth
  // that closes or separates (; , ) ] } ? : && ||), or an assignment.
  int expr_end(int i) const {
    int j = i;
    for (; j < n(); ++j) {
      if (t_[j].kind != token_kind::punctuator) continue;
      const auto s = tx(j);
      if (s == "(" || s == "[" || s == "{") {
        if (match_[j] < 0) return n();
        j = match_[j];
        continue;
      }
      if (tmpl(j) && tmatch_[j] > j) {
        j = tmatch_[j];
        continue;
      }
      if (one_of(s, {")",  "]",  "}",  ";",  ",",  "?",  ":",  "&&", "||",  "=",
                     "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="}))
        return j;
    }
    return j;
  }

  // A `)` that closes a C-style cast such as (float) or (const float*).
  bool cast_paren(int p) const {
    const int o = match_[p];
    if (o < 0 || o + 1 >= p) return false;
    if (ident(o - 1) || punct(o - 1, ")") || punct(o - 1, "]")) return false;
    bool any_type = false;
    for (int k = o + 1; k < p; ++k) {
      if (is_type(k))
        any_type = true;
      else if (!(qualifier(tx(k)) || punct(k, "*") || punct(k, "&") || punct(k, "::") || tmpl(k) ||
                 (ident(k) && punct(k + 1, "::"))))
        return false;
    }
    return any_type;
  }

  // Token p can end an operand (so an operator after it is binary).
  bool operand_end(int p) const {
    if (p < 0) return false;
    const auto& k = t_[p];
    switch (k.kind) {
    case token_kind::number:
    case token_kind::string_literal:
    case token_kind::char_literal:
      return true;
    case token_kind::identifier:
      return !operator_keyword(k.text) && !is_type(p);
    default:
      break;
    }
    if (k.text == "]") return true;
    if (k.text == ")") return !cast_paren(p);
    return false;
  }

  bool binary(int i) const { return operand_end(i - 1); }

  // Token p comes right before the first term of a sum: ( = , ? : { return.
  bool term_start(int p) const {
    return p >= 0 && one_of(tx(p), {"(", "=", ",", "?", ":", "{", "return", "+=", "-="});
  }

  // `T* x` (pointer declarator, `*` against the name): not a product.
  bool multiplication(int i) const {
    if (!punct(i, "*") || !binary(i)) return false;
    if (ident(i - 1) && end(i - 1) == begin(i) && i + 1 < n() && end(i) < begin(i + 1))
      return false;
    return true;
  }

  // The start of the statement holding token i: just after the ; { } before it at its level,
  // or after the ( [ that encloses it.
  int statement_start(int i) const {
    int k = i - 1;
    while (k >= 0) {
      if (punct(k, ";") || punct(k, "{") || punct(k, "}") || punct(k, "(") || punct(k, "[")) break;
      if ((punct(k, ")") || punct(k, "]")) && match_[k] >= 0) {
        k = match_[k] - 1;
        continue;
      }
      --k;
    }
    return k + 1;
  }

  // A statement that declares variables: qualifiers, then a type (a known type, or a name with
  // template arguments), then a declarator.
  bool declaration_at(int s) const {
    int k = s;
    while (k < n() && (qualifier(tx(k)) || tx(k) == "__align__" || tx(k) == "alignas")) {
      if (punct(k + 1, "(") && match_[k + 1] > k) k = match_[k + 1];
      ++k;
    }
    while (ident(k) && punct(k + 1, "::"))
      k += 2;
    if (!ident(k)) return false;
    if (tmpl(k + 1) && tmatch_[k + 1] > k)
      k = tmatch_[k + 1];
    else if (!is_type(k))
      return false;
    ++k;
    while (is_type(k) || tx(k) == "const" || punct(k, "*") || punct(k, "&"))
      ++k;
    return ident(k);
  }

  // `[` of a declarator (float s[N], uint4 a[2], b[2]): not a subscript.
  bool declarator_bracket(int i) const {
    int q = i - 1;
    while (punct(q, "]") && match_[q] > 0)
      q = match_[q] - 1;
    if (!ident(q)) return false;
    const int r = q - 1;
    if (is_type(r) || qualifier(tx(r)) || (tmpl(r) && tx(r) != "<")) return true;
    if ((punct(r, "*") || punct(r, "&")) && (is_type(r - 1) || tmpl(r - 1))) return true;
    if (punct(r, ",")) {
      const int enc = enclosing_[r];
      if (enc >= 0 && !punct(enc, "{")) return false;
      return declaration_at(statement_start(r));
    }
    return false;
  }

  bool subscript(int i) const {
    if (!punct(i, "[") || match_[i] < 0 || match_[i] == i + 1 || punct(i + 1, "[")) return false;
    const int p = i - 1;
    const bool after_operand =
        (ident(p) && !operator_keyword(tx(p)) && !is_type(p)) || punct(p, "]") || punct(p, ")");
    return after_operand && !declarator_bracket(i);
  }

  // A simple operand: NAME, NAME.NAME, NAME->NAME; the end (exclusive) or -1.
  int simple_operand(int k) const {
    if (!ident(k) || operator_keyword(tx(k))) return -1;
    ++k;
    while ((punct(k, ".") || punct(k, "->")) && ident(k + 1))
      k += 2;
    return k;
  }

  // --- arithmetic ---

  void arithmetic() {
    for (int i = 0; i < n(); ++i) {
      if (excluded_[i]) continue;
      if (t_[i].kind == token_kind::number) {
        if (auto p = perturbed_float(tx(i)); !p.empty())
          emit_tokens("float_constant_perturb", i, i + 1, p);
        continue;
      }
      if (t_[i].kind != token_kind::punctuator) continue;
      const auto s = tx(i);
      if (s == "+" && binary(i)) emit_tokens("binary_plus_to_minus", i, i + 1, "-");
      if (s == "-" && binary(i)) emit_tokens("binary_minus_to_plus", i, i + 1, "+");
      if (s == "*" && multiplication(i)) emit_tokens("mul_to_div", i, i + 1, "/");
      if (s == "/" && binary(i)) emit_tokens("div_to_mul", i, i + 1, "*");
      if (s == "+=") emit_tokens("compound_add_to_sub", i, i + 1, "-=");
    }
  }

  // --- precision ---

  void precision() {
    // Float accumulators: float parameters of the function, and float locals declared at the
    // start of a statement (float NAME = ..., NAME2 = ...;), by function.
    std::vector<std::vector<std::pair<std::string, int>>> locals(fns_.size());
    for (int i = 1; i < n(); ++i) {
      if (!device(i) || tx(i) != "float" ||
          !(punct(i - 1, ";") || punct(i - 1, "{") || punct(i - 1, "}")))
        continue;
      for (int k = i + 1; ident(k);) {
        const int name = k++;
        if (punct(k, "=")) k = expr_end(k + 1);
        if (punct(k, ",") || punct(k, ";"))
          locals[func_[i]].emplace_back(std::string(tx(name)), name);
        if (!punct(k, ",")) break;
        ++k;
      }
    }
    for (int i = 1; i < n(); ++i) {
      if (!device(i)) continue;
      const auto s = tx(i);
      if (punct(i, "+=") && ident(i - 1)) {
        const int name = i - 1, f = func_[i];
        const bool starts = punct(name - 1, ";") || punct(name - 1, "{") || punct(name - 1, "}") ||
                            punct(name - 1, ")") || tx(name - 1) == "else";
        bool accumulator = fns_[f].float_params.count(tx(name)) > 0;
        for (const auto& [local, at] : locals[f])
          accumulator = accumulator || (local == tx(name) && at < name);
        const int e = expr_end(i + 1);
        if (starts && accumulator && e < n() && e > i + 1 &&
            (punct(e, ";") || punct(e, ")") || punct(e, ",")))
          emit_tokens("float_accumulator_to_bf16_rounding", name, e,
                      std::string(tx(name)) + " = __uint_as_float(__float_as_uint(" +
                          std::string(tx(name)) + " + (" + text(i + 1, e) + ")) & 0xffff0000u)");
      }
      // static_cast<float>(X) -> (X); float(X) -> (X); (float)X -> X.
      if (s == "static_cast" && tmpl(i + 1) && tmatch_[i + 1] == i + 3 && tx(i + 2) == "float" &&
          punct(i + 4, "(") && match_[i + 4] > i + 4)
        emit_tokens("drop_float_cast", i, match_[i + 4] + 1, text(i + 4, match_[i + 4] + 1));
      if (s == "float" && punct(i + 1, "(") && match_[i + 1] > i + 2 &&
          (!ident(i - 1) || tx(i - 1) == "return") && !punct(i - 1, "::") && !tmpl(i - 1) &&
          !punct(i + 2, "*"))
        emit_tokens("drop_float_cast", i, match_[i + 1] + 1, text(i + 1, match_[i + 1] + 1));
      if (s == "float" && punct(i - 1, "(") && punct(i + 1, ")") && i + 2 < n() &&
          (!ident(i - 2) || tx(i - 2) == "return") && !punct(i + 2, ")") && !punct(i + 2, ";") &&
          !punct(i + 2, ",") && !punct(i + 2, "{"))
        emit_tokens("drop_float_cast", i - 1, i + 2, "");
      // Fast-math intrinsics, called functions only (not std::expf, not a member).
      static constexpr std::array<std::pair<std::string_view, std::string_view>, 11> fast = {{
          {"expf", "__expf"},
          {"exp10f", "__exp10f"},
          {"logf", "__logf"},
          {"log2f", "__log2f"},
          {"log10f", "__log10f"},
          {"sinf", "__sinf"},
          {"cosf", "__cosf"},
          {"tanf", "__tanf"},
          {"powf", "__powf"},
          {"tanhf", "__tanhf"},
          {"sincosf", "__sincosf"},
      }};
      if (ident(i) && punct(i + 1, "(") && !punct(i - 1, ".") && !punct(i - 1, "->") &&
          !punct(i - 1, "::"))
        for (const auto& [from, to] : fast)
          if (s == from) emit_tokens("fast_math_intrinsic", i, i + 1, std::string(to));
    }
    for (int i = 0; i < n(); ++i)
      if (tx(i) == "double" && ident(i)) emit_tokens("double_to_float", i, i + 1, "float");
  }

  // --- indexing ---

  void indexing() {
    bool seen[2][3] = {}, dims[2][3] = {}; // blockIdx/threadIdx, blockDim/gridDim: x, y, z
    auto component = [&](int i) -> int {
      if (!punct(i + 1, ".") || !ident(i + 2)) return -1;
      const auto c = tx(i + 2);
      return c == "x" ? 0 : c == "y" ? 1 : c == "z" ? 2 : -1;
    };
    for (int i = 0; i + 2 < n(); ++i) {
      if (!device(i)) continue;
      const int c = component(i);
      if (c < 0) continue;
      if (tx(i) == "blockIdx") seen[0][c] = true;
      if (tx(i) == "threadIdx") seen[1][c] = true;
      if (tx(i) == "blockDim") dims[0][c] = true;
      if (tx(i) == "gridDim") dims[1][c] = true;
    }
    for (int i = 0; i < n(); ++i) {
      if (!device(i)) continue;
      if (const int c = component(i); c >= 0 && !punct(i - 1, ".") && !punct(i - 1, "->")) {
        const std::string d(tx(i + 2));
        if (seen[0][c] && seen[1][c] && tx(i) == "blockIdx")
          emit_tokens("thread_block_index_swap", i, i + 3, "threadIdx." + d);
        if (seen[0][c] && seen[1][c] && tx(i) == "threadIdx")
          emit_tokens("thread_block_index_swap", i, i + 3, "blockIdx." + d);
        if (dims[0][c] && dims[1][c] && tx(i) == "blockDim")
          emit_tokens("grid_block_dim_swap", i, i + 3, "gridDim." + d);
        if (dims[0][c] && dims[1][c] && tx(i) == "gridDim")
          emit_tokens("grid_block_dim_swap", i, i + 3, "blockDim." + d);
      }
      if (!subscript(i)) continue;
      const int close = match_[i];
      const std::string e = text(i + 1, close);
      emit_tokens("index_plus_one", i, close + 1, "[(" + e + ") + 1]");
      emit_tokens("index_minus_one", i, close + 1, "[(" + e + ") - 1]");
      // [A * B + C] -> [C * B + A]; [A + B * C] -> [B + A * C].
      const int a1 = simple_operand(i + 1);
      if (a1 < 0) continue;
      const int b0 = a1 + 1, b1 = simple_operand(b0);
      if (b1 < 0) continue;
      const int c0 = b1 + 1, c1 = simple_operand(c0);
      if (c1 != close) continue;
      const std::string A = text(i + 1, a1), B = text(b0, b1), C = text(c0, c1);
      if (punct(a1, "*") && punct(b1, "+") && A != C)
        emit_tokens("index_operands_swap", i, close + 1, "[" + C + " * " + B + " + " + A + "]");
      if (punct(a1, "+") && punct(b1, "*") && A != B)
        emit_tokens("index_operands_swap", i, close + 1, "[" + B + " + " + A + " * " + C + "]");
    }
  }

  // --- boundary ---

  void boundary() {
    for (int i = 0; i < n(); ++i) {
      if (!device(i) || t_[i].kind != token_kind::punctuator || tmpl(i)) continue;
      const auto s = tx(i);
      if (s == "<") emit_tokens("lt_to_le", i, i + 1, "<=");
      if (s == "<=") emit_tokens("le_to_lt", i, i + 1, "<");
      if (s == ">") emit_tokens("gt_to_ge", i, i + 1, ">=");
      if (s == ">=") emit_tokens("ge_to_gt", i, i + 1, ">");
    }
    for (int i = 0; i + 1 < n(); ++i) {
      if (!device(i) || tx(i) != "if" || !punct(i + 1, "(") || match_[i + 1] < 0) continue;
      const int open = i + 1, close = match_[open];
      // tail_skip: the bound N of each I < N or I <= N at the condition's top level (of an
      // exit guard, also I >= N and I > N: `if (i >= n) return;`).
      const bool exit_guard =
          close + 1 < n() && one_of(tx(close + 1), {"return", "continue", "break"});
      for (int k = open + 1; k < close; ++k) {
        if (enclosing_[k] != open || tmpl(k)) continue;
        if (!(punct(k, "<") || punct(k, "<=") || (exit_guard && (punct(k, ">") || punct(k, ">=")))))
          continue;
        const int e = expr_end(k + 1);
        if (e > k + 1 && e <= close)
          emit_tokens("tail_skip", k + 1, e, "(" + text(k + 1, e) + ") - 1");
      }
      // guard_removal
      const int body = close + 1;
      if (body >= n() || punct(body, "{") || punct(body, ";") || tx(open + 1) == "true") continue;
      if (one_of(tx(body), {"return", "continue", "break"})) {
        int e = body + 1;
        while (e < n() && !punct(e, ";"))
          e = (punct(e, "(") || punct(e, "[") || punct(e, "{")) && match_[e] > e ? match_[e] + 1
                                                                                 : e + 1;
        if (e >= n()) continue;
        if (tx(e + 1) == "else") {
          emit_tokens("guard_removal", i, close + 1, "if (false)");
        } else {
          const bool sub_statement = punct(i - 1, ")") || tx(i - 1) == "else" || tx(i - 1) == "do";
          emit_tokens("guard_removal", i, e + 1, sub_statement ? ";" : "");
        }
      } else {
        emit_tokens("guard_removal", i, close + 1, "if (true)");
      }
    }
  }

  // --- synchronization ---

  // The top-level argument ranges of the call whose `(` is at `open`.
  std::vector<std::pair<int, int>> arguments(int open) const {
    std::vector<std::pair<int, int>> out;
    const int close = match_[open];
    if (close < 0) return out;
    int a = open + 1;
    for (int k = open + 1; k <= close; ++k) {
      if ((punct(k, "(") || punct(k, "[") || punct(k, "{")) && match_[k] > k && match_[k] < close) {
        k = match_[k];
        continue;
      }
      if (tmpl(k) && tmatch_[k] > k) {
        k = tmatch_[k];
        continue;
      }
      if (punct(k, ",") || k == close) {
        if (k > a) out.emplace_back(a, k);
        a = k + 1;
      }
    }
    return out;
  }

  void synchronization() {
    for (int i = 0; i + 1 < n(); ++i) {
      if (!device(i) || !ident(i) || !punct(i + 1, "(") || match_[i + 1] < 0) continue;
      const auto s = tx(i);
      const int close = match_[i + 1];
      if ((s == "__syncthreads" || s == "__syncwarp") && punct(close + 1, ";") &&
          !punct(i - 1, ".") && !punct(i - 1, "::"))
        emit_tokens(s == "__syncthreads" ? "drop_syncthreads" : "drop_syncwarp", i, close + 2, ";");
      const bool shuffle =
          one_of(s, {"__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync"});
      const bool vote = one_of(s, {"__ballot_sync", "__any_sync", "__all_sync", "__uni_sync",
                                   "__match_any_sync", "__reduce_add_sync", "__reduce_min_sync",
                                   "__reduce_max_sync", "__reduce_or_sync", "__reduce_and_sync"});
      if (!shuffle && !vote) continue;
      const auto args = arguments(i + 1);
      if (shuffle && args.size() >= 3)
        emit_tokens("drop_shuffle", i, close + 1, "(" + text(args[1].first, args[1].second) + ")");
      if (!args.empty() && args[0].second == args[0].first + 1 &&
          t_[args[0].first].kind == token_kind::number && full_mask(tx(args[0].first)))
        emit_tokens("wrong_shuffle_mask", args[0].first, args[0].second, "0x0000ffffu");
    }
  }

  // --- structural ---

  void structural() {
    for (const auto& f : fns_)
      if (f.global) emit_tokens("early_return", f.body_open, f.body_open + 1, "{ return;");
    for (int i = 0; i + 1 < n(); ++i) {
      if (!device(i) || tx(i) != "for" || !punct(i + 1, "(") || match_[i + 1] < 0) continue;
      const int open = i + 1, close = match_[open];
      std::vector<int> semis;
      for (int k = open + 1; k < close; ++k)
        if (punct(k, ";") && enclosing_[k] == open) semis.push_back(k);
      if (semis.size() != 2) continue; // a range-for, or malformed
      const int s1 = semis[0], s2 = semis[1];
      // init: [type words] VAR = A
      int var = -1, a0 = -1;
      for (int k = open + 1; k < s1; ++k)
        if (punct(k, "=")) {
          var = k - 1;
          a0 = k + 1;
          break;
        }
      bool simple_init = var > open && ident(var) && a0 < s1 && expr_end(a0) == s1;
      for (int k = open + 1; simple_init && k < var; ++k)
        simple_init = ident(k) || punct(k, "::");
      const std::string v = simple_init ? std::string(tx(var)) : std::string();
      // step: VAR++, ++VAR, VAR += S, VAR /= 2, VAR >>= 1, VAR = VAR / 2, ...
      std::string step; // the step's tokens, one space apart
      for (int k = s2 + 1; k < close; ++k)
        step += (step.empty() ? "" : " ") + std::string(tx(k));
      auto step_is = [&](std::initializer_list<std::string_view> forms) {
        for (auto f : forms) {
          std::string want(f);
          for (std::size_t p; (p = want.find('@')) != std::string::npos;)
            want.replace(p, 1, v);
          if (step == want) return true;
        }
        return false;
      };
      const bool up = simple_init && (step_is({"@ ++", "++ @"}) ||
                                      (s2 + 2 < close && tx(s2 + 1) == v && punct(s2 + 2, "+=")));
      const bool down = simple_init && (step_is({"@ --", "-- @"}) ||
                                        (s2 + 2 < close && tx(s2 + 1) == v && punct(s2 + 2, "-=")));
      const bool halving = simple_init && step_is({"@ /= 2", "@ >>= 1", "@ = @ / 2", "@ = @ >> 1"});
      const bool doubling =
          simple_init && step_is({"@ *= 2", "@ <<= 1", "@ = @ * 2", "@ = @ << 1"});
      if (up || down)
        emit_tokens("skip_first_iteration", a0, s1, "(" + text(a0, s1) + (up ? ") + 1" : ") - 1"));
      // condition: VAR op B
      const int c0 = s1 + 1;
      if (ident(c0) && (v.empty() || tx(c0) == v) && c0 + 2 < s2) {
        const auto op = tx(c0 + 1);
        const int e = expr_end(c0 + 2);
        if (!tmpl(c0 + 1) && e > c0 + 2 && e <= s2 && one_of(op, {"<", "<=", ">", ">="})) {
          const bool less = op == "<" || op == "<=";
          emit_tokens("skip_last_iteration", c0 + 2, e,
                      "(" + text(c0 + 2, e) + (less ? ") - 1" : ") + 1"));
        }
      }
      if (halving || doubling) {
        std::string suffix;
        const long long x =
            a0 + 1 == s1 && t_[a0].kind == token_kind::number ? integer_value(tx(a0), &suffix) : -1;
        std::string repl;
        if (x >= (halving ? 2 : 1) && (x & (x - 1)) == 0)
          repl = std::to_string(halving ? x / 2 : x * 2) + suffix;
        else if (x < 0)
          repl = "(" + text(a0, s1) + (halving ? ") / 2" : ") * 2");
        if (!repl.empty()) emit_tokens("drop_reduction_step", a0, s1, repl);
      }
    }
  }

  // --- parameter use ---

  // The factor around a parameter subscript P = W[i]: W[i] itself, F(W[i]), F(&W[i]) or
  // static_cast<T>(W[i]); the token range [first, last].
  std::pair<int, int> factor(int name) const {
    const int close = match_[name + 1];
    int first = name, last = close;
    if (punct(first - 1, "&")) --first;
    if (punct(first - 1, "(") && match_[first - 1] == last + 1) {
      const int o = first - 1;
      if (ident(o - 1) && !control_word(tx(o - 1)) && !operator_keyword(tx(o - 1)))
        return {o - 1, last + 1};
      if (tmpl(o - 1) && tx(o - 1) == ">" && cast_word(tx(tmatch_[o - 1] - 1)))
        return {tmatch_[o - 1] - 1, last + 1};
    }
    if (first != name) return {-1, -1}; // &W[i] not inside a call
    return {first, last};
  }

  // `out = (A[k] - mean) * rstd * W[i] + B[i]` -> `out = ((A[k] * W[i] + B[i]) - mean) * rstd`:
  // the affine applied to the input read (the first subscripted read of the assignment's right
  // side) instead of the normalized value -- the first audit's affine-before-norm formula, as one
  // contiguous edit. [p0, p1] is the weight factor, after a `*`. Only where a bias follows or the
  // read has a statistic subtracted: a weight alone before a pure scaling is the same product.
  void apply_before_normalization(int p0, int p1) {
    int s = p0 - 1;
    while (s > 0 && !one_of(tx(s - 1), {";", "{", "}"}))
      --s;
    int eq = -1;
    for (int k = s; k < p0 - 1 && eq < 0; ++k)
      if (punct(k, "=")) eq = k;
    if (eq < 0) return;
    int read = -1;
    for (int k = eq + 1; k + 1 < p0 - 1 && read < 0; ++k)
      if (ident(k) && subscript(k + 1) && !weight_name(tx(k)) && !bias_name(tx(k)) &&
          match_[k + 1] < p0 - 1)
        read = k;
    if (read < 0) return;
    const int close = match_[read + 1];
    std::string mid(src_.substr(end(close), begin(p0 - 1) - end(close)));
    while (!mid.empty() && (mid.back() == ' ' || mid.back() == '\t'))
      mid.pop_back();
    // The bias term right after the weight factor, if any.
    int q0 = -1, q1 = -1;
    if (punct(p1 + 1, "+") && binary(p1 + 1))
      for (int k = p1 + 2; k < n() && k < p1 + 8 && q0 < 0; ++k)
        if (ident(k) && bias_name(tx(k)) && subscript(k + 1)) {
          const auto [b0, b1] = factor(k);
          if (b0 == p1 + 2) std::tie(q0, q1) = std::pair{b0, b1};
        }
    bool subtracts = false;
    for (int k = close + 1; k < p0 - 1; ++k)
      subtracts = subtracts || (punct(k, "-") && binary(k));
    if (q0 < 0 && !subtracts) return;
    std::string affine = text(read, close + 1) + " * " + text(p0, p1 + 1);
    if (q0 >= 0) affine += " + " + text(q0, q1 + 1);
    emit(std::string_view("apply_before_normalization"), begin(read), end(q0 >= 0 ? q1 : p1),
         "(" + affine + ")" + mid);
  }

  void parameter_use() {
    for (int i = 0; i + 1 < n(); ++i) {
      if (!device(i) || !ident(i)) continue;
      const auto s = tx(i);
      const auto& f = fns_[func_[i]];
      // eps: + eps, or eps + at the start of a sum.
      if (eps_name(s) && !punct(i - 1, ".") && !punct(i - 1, "->") && !punct(i + 1, "(")) {
        if (punct(i - 1, "+") && binary(i - 1))
          remove_tokens("omit_eps", i - 1, i + 1);
        else if (punct(i + 1, "+") && term_start(i - 1))
          emit(std::string_view("omit_eps"), begin(i), begin(i + 2), "");
      }
      const bool w = weight_name(s), b = bias_name(s);
      if (!(w || b) || !f.pointer_params.count(s) || !subscript(i + 1) || punct(i - 1, ".") ||
          punct(i - 1, "->"))
        continue;
      if (!(tx(i + 2) == "0" && match_[i + 1] == i + 3))
        emit_tokens("scalar_instead_of_per_channel", i + 1, match_[i + 1] + 1, "[0]");
      const auto [p0, p1] = factor(i);
      if (p0 < 0) continue;
      const std::string P = text(p0, p1 + 1);
      if (w) {
        if (punct(p0 - 1, "*") && multiplication(p0 - 1)) {
          apply_before_normalization(p0, p1);
          remove_tokens("omit_weight", p0 - 1, p1 + 1);
          emit_tokens("apply_weight_twice", p0, p1 + 1, P + " * " + P);
        } else if (punct(p1 + 1, "*") && !punct(p0 - 1, "/") && p1 + 2 < n()) {
          emit(std::string_view("omit_weight"), begin(p0), begin(p1 + 2), "");
          emit_tokens("apply_weight_twice", p0, p1 + 1, P + " * " + P);
        }
      } else {
        if (punct(p0 - 1, "+") && binary(p0 - 1) && !punct(p1 + 1, "*") && !punct(p1 + 1, "/")) {
          remove_tokens("omit_bias", p0 - 1, p1 + 1);
          emit_tokens("apply_bias_twice", p0 - 1, p1 + 1, "+ " + P + " + " + P);
        } else if (punct(p1 + 1, "+") && term_start(p0 - 1) && p1 + 2 < n()) {
          emit(std::string_view("omit_bias"), begin(p0), begin(p1 + 2), "");
          emit_tokens("apply_bias_twice", p0, p1 + 1, P + " + " + P);
        }
      }
    }
    // Literal epsilons: + 1e-5f where the literal is in (0, 1e-3].
    for (int i = 1; i < n(); ++i) {
      if (!device(i) || t_[i].kind != token_kind::number || perturbed_float(tx(i)).empty())
        continue;
      const double v = literal_value(tx(i));
      if (v > 0 && v <= 1e-3 && punct(i - 1, "+") && binary(i - 1))
        remove_tokens("omit_eps", i - 1, i + 1);
    }
  }
};

} // namespace

std::span<const std::string_view> mutation_family_names() {
  return families;
}

std::span<const mutation_rule_info> mutation_rules() {
  return rules;
}

std::vector<mutation_site> find_mutation_sites(std::string_view source) {
  return analysis(source).run();
}

std::vector<std::pair<std::size_t, std::size_t>> device_only_code(std::string_view source) {
  return analysis(source).device_only_bodies();
}

} // namespace kg
