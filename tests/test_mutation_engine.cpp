// The mutation engine (mutants/): the CUDA lexer on tricky input, every rule's exact sites on the
// fixture kernel tests/fixtures/mutants/fixture.cu (rule, line, column, original and replacement,
// written out by hand below), apply_mutant and its mismatch error, stable ids (one computed by
// hand with sha256sum), and the rules' heuristics on small sources.
#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "mutants/cuda_lexer.h"
#include "mutants/mutant_catalog.h"
#include "mutants/mutation_rules.h"

using namespace kg;

namespace {

const std::string fixture_path = "tests/fixtures/mutants/fixture.cu";

std::string fixture_source() {
  std::ifstream in(std::string(KG_SOURCE_DIR) + "/" + fixture_path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<mutant> fixture_mutants() {
  return generate_mutants(fixture_source(), fixture_path, "fixture");
}

// The tokens' texts and kinds.
std::vector<std::string> texts(std::string_view src) {
  std::vector<std::string> out;
  for (const auto& t : lex_cuda(src))
    out.emplace_back(t.text);
  return out;
}

const token& find_token(const std::vector<token>& ts, std::string_view text) {
  for (const auto& t : ts)
    if (t.text == text) return t;
  throw std::runtime_error("no token " + std::string(text));
}

// The sites of one rule in a source, as "original -> replacement".
std::vector<std::string> sites_of(std::string_view src, std::string_view rule) {
  std::vector<std::string> out;
  for (const auto& s : find_mutation_sites(src))
    if (s.rule == rule) out.push_back(s.original + " -> " + s.replacement);
  return out;
}

struct expected_site {
  std::string rule;
  int line, column;
  std::string original, replacement;
};

// Every site of the fixture, by family and rule, each checked by reading the fixture's line.
const std::vector<expected_site> fixture_sites = {
    // arithmetic
    {"binary_plus_to_minus", 24, 27, "+", "-"},
    {"binary_plus_to_minus", 28, 27, "+", "-"},
    {"binary_plus_to_minus", 28, 56, "+", "-"},
    {"binary_plus_to_minus", 30, 53, "+", "-"},
    {"binary_plus_to_minus", 33, 20, "+", "-"},
    {"binary_plus_to_minus", 33, 41, "+", "-"},
    {"binary_plus_to_minus", 33, 72, "+", "-"},
    {"binary_plus_to_minus", 42, 53, "+", "-"},
    {"binary_minus_to_plus", 28, 32, "-", "+"},
    {"binary_minus_to_plus", 28, 61, "-", "+"},
    {"binary_minus_to_plus", 33, 46, "-", "+"},
    {"mul_to_div", 24, 20, "*", "/"},
    {"mul_to_div", 28, 20, "*", "/"},
    {"mul_to_div", 28, 40, "*", "/"},
    {"mul_to_div", 28, 49, "*", "/"},
    {"mul_to_div", 30, 42, "*", "/"},
    {"mul_to_div", 33, 13, "*", "/"},
    {"mul_to_div", 33, 34, "*", "/"},
    {"mul_to_div", 33, 54, "*", "/"},
    {"mul_to_div", 33, 65, "*", "/"},
    {"div_to_mul", 25, 38, "/", "*"},
    {"div_to_mul", 29, 56, "/", "*"},
    {"div_to_mul", 42, 58, "/", "*"},
    {"compound_add_to_sub", 11, 7, "+=", "-="},
    {"compound_add_to_sub", 21, 46, "+=", "-="},
    {"compound_add_to_sub", 23, 36, "+=", "-="},
    {"compound_add_to_sub", 24, 11, "+=", "-="},
    {"compound_add_to_sub", 27, 36, "+=", "-="},
    {"compound_add_to_sub", 28, 10, "+=", "-="},
    {"compound_add_to_sub", 32, 36, "+=", "-="},
    {"float_constant_perturb", 7, 23, "1e-5f", "1.001e-5f"},
    {"float_constant_perturb", 30, 37, "0.5f", "0.5005f"},
    // precision
    {"float_accumulator_to_bf16_rounding", 11, 5, "v += __shfl_xor_sync(0xffffffffu, v, o)",
     "v = __uint_as_float(__float_as_uint(v + (__shfl_xor_sync(0xffffffffu, v, o))) & "
     "0xffff0000u)"},
    {"float_accumulator_to_bf16_rounding", 24, 7, "sum += x[row * cols + c]",
     "sum = __uint_as_float(__float_as_uint(sum + (x[row * cols + c])) & 0xffff0000u)"},
    {"drop_float_cast", 25, 40, "static_cast<float>(cols)", "(cols)"},
    {"drop_float_cast", 29, 32, "static_cast<float>(ss)", "(ss)"},
    {"fast_math_intrinsic", 30, 31, "expf", "__expf"},
    {"fast_math_intrinsic", 30, 44, "logf", "__logf"},
    {"double_to_float", 26, 5, "double", "float"},
    // indexing
    {"index_plus_one", 24, 15, "[row * cols + c]", "[(row * cols + c) + 1]"},
    {"index_plus_one", 28, 15, "[row * cols + c]", "[(row * cols + c) + 1]"},
    {"index_plus_one", 28, 44, "[row * cols + c]", "[(row * cols + c) + 1]"},
    {"index_plus_one", 30, 25, "[0]", "[(0) + 1]"},
    {"index_plus_one", 33, 8, "[row * cols + c]", "[(row * cols + c) + 1]"},
    {"index_plus_one", 33, 29, "[row * cols + c]", "[(row * cols + c) + 1]"},
    {"index_plus_one", 33, 61, "[0]", "[(0) + 1]"},
    {"index_plus_one", 33, 68, "[c]", "[(c) + 1]"},
    {"index_plus_one", 33, 75, "[c]", "[(c) + 1]"},
    {"index_minus_one", 24, 15, "[row * cols + c]", "[(row * cols + c) - 1]"},
    {"index_minus_one", 28, 15, "[row * cols + c]", "[(row * cols + c) - 1]"},
    {"index_minus_one", 28, 44, "[row * cols + c]", "[(row * cols + c) - 1]"},
    {"index_minus_one", 30, 25, "[0]", "[(0) - 1]"},
    {"index_minus_one", 33, 8, "[row * cols + c]", "[(row * cols + c) - 1]"},
    {"index_minus_one", 33, 29, "[row * cols + c]", "[(row * cols + c) - 1]"},
    {"index_minus_one", 33, 61, "[0]", "[(0) - 1]"},
    {"index_minus_one", 33, 68, "[c]", "[(c) - 1]"},
    {"index_minus_one", 33, 75, "[c]", "[(c) - 1]"},
    {"index_operands_swap", 24, 15, "[row * cols + c]", "[c * cols + row]"},
    {"index_operands_swap", 28, 15, "[row * cols + c]", "[c * cols + row]"},
    {"index_operands_swap", 28, 44, "[row * cols + c]", "[c * cols + row]"},
    {"index_operands_swap", 33, 8, "[row * cols + c]", "[c * cols + row]"},
    {"index_operands_swap", 33, 29, "[row * cols + c]", "[c * cols + row]"},
    {"thread_block_index_swap", 19, 20, "threadIdx.x", "blockIdx.x"},
    {"thread_block_index_swap", 21, 18, "blockIdx.x", "threadIdx.x"},
    {"grid_block_dim_swap", 21, 49, "gridDim.x", "blockDim.x"},
    {"grid_block_dim_swap", 23, 39, "blockDim.x", "gridDim.x"},
    {"grid_block_dim_swap", 27, 39, "blockDim.x", "gridDim.x"},
    {"grid_block_dim_swap", 32, 39, "blockDim.x", "gridDim.x"},
    // boundary
    {"lt_to_le", 21, 34, "<", "<="},
    {"lt_to_le", 23, 26, "<", "<="},
    {"lt_to_le", 27, 26, "<", "<="},
    {"lt_to_le", 32, 26, "<", "<="},
    {"le_to_lt", 20, 26, "<=", "<"},
    {"gt_to_ge", 10, 22, ">", ">="},
    {"ge_to_gt", 20, 12, ">=", ">"},
    {"tail_skip", 20, 15, "32", "(32) - 1"},
    {"tail_skip", 20, 29, "0", "(0) - 1"},
    {"guard_removal", 20, 3, "if (lane >= 32 || cols <= 0) return;", ""},
    {"guard_removal", 30, 5, "if (lane == 0)", "if (true)"},
    // synchronization
    {"drop_syncthreads", 34, 5, "__syncthreads();", ";"},
    {"drop_syncwarp", 31, 5, "__syncwarp();", ";"},
    {"drop_shuffle", 11, 10, "__shfl_xor_sync(0xffffffffu, v, o)", "(v)"},
    {"wrong_shuffle_mask", 11, 26, "0xffffffffu", "0x0000ffffu"},
    // structural
    {"skip_first_iteration", 21, 18, "blockIdx.x", "(blockIdx.x) + 1"},
    {"skip_first_iteration", 23, 18, "lane", "(lane) + 1"},
    {"skip_first_iteration", 27, 18, "lane", "(lane) + 1"},
    {"skip_first_iteration", 32, 18, "lane", "(lane) + 1"},
    {"skip_last_iteration", 10, 24, "0", "(0) + 1"},
    {"skip_last_iteration", 21, 36, "rows", "(rows) - 1"},
    {"skip_last_iteration", 23, 28, "cols", "(cols) - 1"},
    {"skip_last_iteration", 27, 28, "cols", "(cols) - 1"},
    {"skip_last_iteration", 32, 28, "cols", "(cols) - 1"},
    {"early_return", 17, 100, "{", "{ return;"},
    {"drop_reduction_step", 10, 16, "16", "8"},
    // parameter_use
    {"omit_weight", 33, 64, " * w[c]", ""},
    {"omit_bias", 33, 71, " + b[c]", ""},
    {"omit_eps", 30, 52, " + eps", ""},
    {"scalar_instead_of_per_channel", 33, 68, "[c]", "[0]"},
    {"scalar_instead_of_per_channel", 33, 75, "[c]", "[0]"},
    {"apply_weight_twice", 33, 67, "w[c]", "w[c] * w[c]"},
    {"apply_bias_twice", 33, 72, "+ b[c]", "+ b[c] + b[c]"},
    {"apply_before_normalization", 33, 28, "x[row * cols + c] - mean) * stats[0] * w[c] + b[c]",
     "(x[row * cols + c] * w[c] + b[c]) - mean) * stats[0]"},
};

} // namespace

// --- the lexer ------------------------------------------------------------------------------

TEST(cuda_lexer, launch_brackets_are_one_token_and_template_brackets_single) {
  EXPECT_EQ(texts("k<<<grid, 256, 0, s>>>(x);"),
            (std::vector<std::string>{"k", "<<<", "grid", ",", "256", ",", "0", ",", "s", ">>>",
                                      "(", "x", ")", ";"}));
  EXPECT_EQ(texts("gemm<true><<<g, b>>>(static_cast<float>(n));"),
            (std::vector<std::string>{"gemm", "<", "true", ">", "<<<", "g", ",", "b", ">>>", "(",
                                      "static_cast", "<", "float", ">", "(", "n", ")", ")", ";"}));
  EXPECT_EQ(
      texts("a->b; x >>= 1; y <<= 2; z = u >> 3 << 4; s::t; i++; j += k; p ... q"),
      (std::vector<std::string>{"a", "->", "b", ";",  "x",  ">>=", "1", ";", "y",   "<<=", "2", ";",
                                "z", "=",  "u", ">>", "3",  "<<",  "4", ";", "s",   "::",  "t", ";",
                                "i", "++", ";", "j",  "+=", "k",   ";", "p", "...", "q"}));
}

TEST(cuda_lexer, numbers_keep_their_exponents_and_suffixes) {
  const auto ts = lex_cuda("a = 1.0f + 1e-5f - 0x7fffffff * 32u / .5 + 1E+3L - 0x1p-3f + 1'000;");
  std::vector<std::string> numbers;
  for (const auto& t : ts)
    if (t.kind == token_kind::number) numbers.emplace_back(t.text);
  EXPECT_EQ(numbers, (std::vector<std::string>{"1.0f", "1e-5f", "0x7fffffff", "32u", ".5", "1E+3L",
                                               "0x1p-3f", "1'000"}));
}

TEST(cuda_lexer, comments_strings_and_directives_are_whole_tokens_with_positions) {
  const std::string src = "#define MUL(a, b) \\\n  ((a) * (b))\n"
                          "int x = 1; // a * b + c\n"
                          "/* x < y\n >= z */ const char* s = \"a + b\"; char c = '+';\n"
                          "auto r = R\"(x * y)\";\n";
  const auto ts = lex_cuda(src);
  const auto& def = ts.front();
  EXPECT_EQ(def.kind, token_kind::preprocessor);
  EXPECT_EQ(def.text, "#define MUL(a, b) \\\n  ((a) * (b))");
  const auto& line = find_token(ts, "// a * b + c");
  EXPECT_EQ(line.kind, token_kind::comment);
  EXPECT_EQ(line.line, 3);
  EXPECT_EQ(line.column, 12);
  EXPECT_EQ(line.offset, src.find("// a"));
  const auto& block = find_token(ts, "/* x < y\n >= z */");
  EXPECT_EQ(block.kind, token_kind::comment);
  EXPECT_EQ(block.line, 4);
  EXPECT_EQ(block.column, 1);
  EXPECT_EQ(find_token(ts, "\"a + b\"").kind, token_kind::string_literal);
  EXPECT_EQ(find_token(ts, "'+'").kind, token_kind::char_literal);
  EXPECT_EQ(find_token(ts, "R\"(x * y)\"").kind, token_kind::string_literal);
  const auto& s = find_token(ts, "s");
  EXPECT_EQ(s.line, 5);
  EXPECT_EQ(s.column, 22);
  EXPECT_EQ(s.length, 1u);
  for (const auto& t : ts) // every token's bytes are the source's
    EXPECT_EQ(src.substr(t.offset, t.length), t.text);
  // Nothing in a comment, a literal or a directive is mutated.
  const std::string kernel = "__device__ float f(float a, float b) {\n" + src + "return a + b; }";
  const auto sites = find_mutation_sites(kernel);
  ASSERT_FALSE(sites.empty());
  for (const auto& site : sites)
    EXPECT_GT(site.offset, kernel.find("R\"(x * y)\"")) << site.rule << " " << site.original;
}

TEST(cuda_lexer, unterminated_input_ends_at_the_end_and_never_throws) {
  for (const char* src : {"/* open", "\"open", "R\"x(open", "#if 1 \\", "'", "a @ b ` c"}) {
    const std::string s = src;
    const auto ts = lex_cuda(s);
    ASSERT_FALSE(ts.empty()) << s;
    EXPECT_EQ(ts.back().offset + ts.back().length, s.size()) << s;
  }
}

// --- every rule on the fixture ----------------------------------------------------------------

TEST(mutation_rules, seven_families_in_order_and_every_rule_in_one_of_them) {
  EXPECT_EQ(mutant_families(),
            (std::vector<std::string>{"arithmetic", "precision", "indexing", "boundary",
                                      "synchronization", "structural", "parameter_use"}));
  std::set<std::string> names;
  for (const auto& r : mutation_rules()) {
    EXPECT_TRUE(names.insert(std::string(r.name)).second) << r.name;
    EXPECT_NE(std::find(mutant_families().begin(), mutant_families().end(), r.family),
              mutant_families().end())
        << r.name;
    for (char c : r.name)
      EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') << r.name;
  }
  EXPECT_GE(names.size(), 35u);
}

TEST(mutation_rules, every_rule_gives_exactly_the_hand_written_sites_of_the_fixture) {
  const std::string src = fixture_source();
  ASSERT_FALSE(src.empty());
  const auto got = fixture_mutants();
  using key = std::tuple<std::string, int, int, std::string, std::string>;
  std::multiset<key> want, have;
  for (const auto& e : fixture_sites)
    want.insert({e.rule, e.line, e.column, e.original, e.replacement});
  for (const auto& m : got)
    have.insert({m.rule, m.line, m.column, m.original, m.replacement});
  for (const auto& k : want)
    EXPECT_TRUE(have.count(k)) << "missing: " << std::get<0>(k) << " " << std::get<1>(k) << ":"
                               << std::get<2>(k) << " '" << std::get<3>(k) << "' -> '"
                               << std::get<4>(k) << "'";
  for (const auto& k : have)
    EXPECT_TRUE(want.count(k)) << "unexpected: " << std::get<0>(k) << " " << std::get<1>(k) << ":"
                               << std::get<2>(k) << " '" << std::get<3>(k) << "' -> '"
                               << std::get<4>(k) << "'";
  EXPECT_EQ(got.size(), fixture_sites.size());
  // Every rule has a site on the fixture.
  for (const auto& r : mutation_rules())
    EXPECT_TRUE(std::any_of(fixture_sites.begin(), fixture_sites.end(),
                            [&](const auto& e) { return e.rule == r.name; }))
        << "no fixture site for " << r.name;
  // Line and column name where the original text stands, and the family is the rule's.
  std::vector<std::size_t> line_start = {0};
  for (std::size_t k = 0; k < src.size(); ++k)
    if (src[k] == '\n') line_start.push_back(k + 1);
  for (const auto& m : got) {
    EXPECT_EQ(line_start[m.line - 1] + m.column - 1, m.offset) << m.rule;
    EXPECT_EQ(src.substr(m.offset, m.length), m.original) << m.rule;
    EXPECT_NE(m.original, m.replacement) << m.rule;
    EXPECT_EQ(m.task, "fixture");
    EXPECT_EQ(m.path, fixture_path);
    for (const auto& r : mutation_rules())
      if (r.name == m.rule) {
        EXPECT_EQ(r.family, m.family);
      }
  }
  // Ordered by offset, then rule.
  for (std::size_t k = 1; k < got.size(); ++k)
    EXPECT_TRUE(std::tie(got[k - 1].offset, got[k - 1].rule) <
                std::tie(got[k].offset, got[k].rule));
}

// --- apply_mutant and ids ---------------------------------------------------------------------

TEST(mutant_catalog, apply_replaces_exactly_the_site_and_refuses_another_text) {
  const std::string src = fixture_source();
  for (const auto& m : fixture_mutants()) {
    const std::string out = apply_mutant(src, m);
    EXPECT_EQ(out.size(), src.size() - m.length + m.replacement.size());
    EXPECT_EQ(out.substr(0, m.offset), src.substr(0, m.offset));
    EXPECT_EQ(out.substr(m.offset, m.replacement.size()), m.replacement);
    EXPECT_EQ(out.substr(m.offset + m.replacement.size()), src.substr(m.offset + m.length));
    // The inverse mutant restores the source byte for byte.
    mutant back = m;
    std::swap(back.original, back.replacement);
    back.length = back.original.size();
    EXPECT_EQ(apply_mutant(out, back), src);
  }
  const auto m = fixture_mutants().front();
  std::string edited = src;
  edited[m.offset] = '#';
  try {
    (void)apply_mutant(edited, m);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(m.id), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("original text"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)apply_mutant(src.substr(0, m.offset), m), std::invalid_argument);
  mutant far = m;
  far.offset = src.size() + 10;
  EXPECT_THROW((void)apply_mutant(src, far), std::invalid_argument);
}

TEST(mutant_catalog, ids_are_sha256_of_rule_path_site_and_texts_and_stable) {
  // printf '%s\0%s\0%s\0%s\0%s' omit_bias tests/fixtures/mutants/fixture.cu 33:71 ' + b[c]' '' |
  //   sha256sum  ->  dff6d8be08e5379140eee7bc7cda95d4d49332aa1c6ffa0e7a68ea16520f162c
  const auto ms = fixture_mutants();
  const auto it = std::find_if(ms.begin(), ms.end(), [](const mutant& m) {
    return m.rule == "omit_bias" && m.line == 33 && m.column == 71;
  });
  ASSERT_NE(it, ms.end());
  EXPECT_EQ(it->original, " + b[c]");
  EXPECT_EQ(it->replacement, "");
  EXPECT_EQ(it->id, "dff6d8be08e53791");
  EXPECT_EQ(mutant_id("omit_bias", fixture_path, 33, 71, " + b[c]", ""), "dff6d8be08e53791");
  std::set<std::string> ids;
  for (const auto& m : ms) {
    EXPECT_EQ(m.id.size(), 16u);
    EXPECT_EQ(m.id.find_first_not_of("0123456789abcdef"), std::string::npos) << m.id;
    EXPECT_TRUE(ids.insert(m.id).second) << m.id;
  }
  EXPECT_EQ(fixture_mutants(), ms); // a second run gives the same catalog
  // Another path names other mutants.
  const auto moved = generate_mutants(fixture_source(), "elsewhere/fixture.cu", "fixture");
  ASSERT_EQ(moved.size(), ms.size());
  for (std::size_t k = 0; k < ms.size(); ++k)
    EXPECT_NE(moved[k].id, ms[k].id);
}

TEST(mutant_catalog, json_round_trip_and_field_errors) {
  for (const auto& m : fixture_mutants()) {
    EXPECT_EQ(mutant_from_json(to_json(m)), m);
    EXPECT_EQ(mutant_from_json(nlohmann::json::parse(to_json(m).dump())), m);
  }
  const auto j = to_json(fixture_mutants().front());
  for (const char* k : {"id", "family", "rule", "path", "task", "line", "column", "offset",
                        "length", "original", "replacement"}) {
    auto bad = j;
    bad.erase(k);
    try {
      (void)mutant_from_json(bad);
      ADD_FAILURE() << k;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(k), std::string::npos) << e.what();
    }
  }
  auto negative = j;
  negative["line"] = -1;
  EXPECT_THROW((void)mutant_from_json(negative), std::invalid_argument);
  EXPECT_THROW((void)mutant_from_json(nlohmann::json::array()), std::invalid_argument);
}

// --- the rules' heuristics on small sources -----------------------------------------------------

TEST(mutation_rules, binary_operators_only_not_unary_pointers_or_increments) {
  const std::string src = "__device__ float f(const float* p, float* q, int n) {\n"
                          "  float* r = q; const float4* v = nullptr; float a = -p[0];\n"
                          "  a = *p * *q; ++n; n++; n += 2; a = (float)-a; r = &q[n];\n"
                          "  return a - -1.5f + sizeof(float) * n; }";
  EXPECT_EQ(sites_of(src, "mul_to_div"), (std::vector<std::string>{"* -> /", "* -> /"}));
  EXPECT_EQ(sites_of(src, "binary_minus_to_plus"), (std::vector<std::string>{"- -> +"}));
  EXPECT_EQ(sites_of(src, "binary_plus_to_minus"), (std::vector<std::string>{"+ -> -"}));
  EXPECT_EQ(sites_of(src, "compound_add_to_sub"), (std::vector<std::string>{"+= -> -="}));
  // The two products: `*p * *q` (the middle one) and `sizeof(float) * n`.
  std::vector<std::size_t> at;
  for (const auto& s : find_mutation_sites(src))
    if (s.rule == "mul_to_div") at.push_back(s.offset);
  ASSERT_EQ(at.size(), 2u);
  EXPECT_EQ(at[0], src.find("* *q"));
  EXPECT_EQ(at[1], src.find("* n;"));
}

TEST(mutation_rules, template_brackets_and_launches_are_not_comparisons) {
  const std::string src =
      "template <int N> __device__ int g(int i) { return i; }\n"
      "__global__ void k(float* y, int n) {\n"
      "  const int i = static_cast<int>(threadIdx.x) + g<4>(n);\n"
      "  if (i < n && n > 2) y[i] = static_cast<float>(reinterpret_cast<uintptr_t>(y) >> 4);\n"
      "}\n"
      "void host(float* y, int n) { k<<<1, 32>>>(y, n); if (n < 3) n = 3; }";
  EXPECT_EQ(sites_of(src, "lt_to_le"), (std::vector<std::string>{"< -> <="}));
  EXPECT_EQ(sites_of(src, "gt_to_ge"), (std::vector<std::string>{"> -> >="}));
  for (const auto& s : find_mutation_sites(src)) {
    EXPECT_EQ(s.original.find("<<<"), std::string::npos) << s.rule;
    EXPECT_EQ(s.original.find(">>>"), std::string::npos) << s.rule;
  }
}

TEST(mutation_rules, floating_constants_keep_their_style) {
  const std::string src = "__device__ float f(float x) {\n"
                          "  return x * 0.5f + 1e-5f + 2.0 + .25F + 3.f + 1.0E+3 + 0.0f + 7 + "
                          "0x10 + 0.044715f; }";
  EXPECT_EQ(sites_of(src, "float_constant_perturb"),
            (std::vector<std::string>{"0.5f -> 0.5005f", "1e-5f -> 1.001e-5f", "2.0 -> 2.002",
                                      ".25F -> 0.25025F", "3.f -> 3.003f", "1.0E+3 -> 1.001E+3",
                                      "0.044715f -> 0.044759715f"}));
}

TEST(mutation_rules, accumulators_are_float_locals_and_parameters_updated_with_plus_equals) {
  const std::string src = "__device__ float f(float v, double d, const float* x, int n) {\n"
                          "  float acc = 0.0f, other = 1.0f; int k = 0; double w = 0;\n"
                          "  for (int i = 0; i < n; ++i) acc += x[i];\n"
                          "  v += acc; k += 1; w += d; d += 1; other *= 2;\n"
                          "  return v + other; }\n"
                          "float host(float a) { a += 1; return a; }";
  EXPECT_EQ(sites_of(src, "float_accumulator_to_bf16_rounding"),
            (std::vector<std::string>{
                "acc += x[i] -> acc = __uint_as_float(__float_as_uint(acc + (x[i])) & 0xffff0000u)",
                "v += acc -> v = __uint_as_float(__float_as_uint(v + (acc)) & 0xffff0000u)"}));
}

TEST(mutation_rules, parameter_rules_need_a_weight_or_bias_pointer_parameter) {
  // `scale` and `b` here are scalars and a loop variable, not per-channel parameters.
  const std::string src =
      "__global__ void k(const float* x, const float* gamma, const float* beta, float scale,\n"
      "                  float* y, int n) {\n"
      "  for (int b = 0; b < n; ++b)\n"
      "    y[b] = beta[b] + x[b] * scale * __ldg(&gamma[b]) + 1e-6f;\n"
      "}";
  EXPECT_EQ(sites_of(src, "omit_weight"), (std::vector<std::string>{" * __ldg(&gamma[b]) -> "}));
  EXPECT_EQ(sites_of(src, "apply_weight_twice"),
            (std::vector<std::string>{"__ldg(&gamma[b]) -> __ldg(&gamma[b]) * __ldg(&gamma[b])"}));
  EXPECT_EQ(sites_of(src, "omit_bias"), (std::vector<std::string>{"beta[b] +  -> "}));
  EXPECT_EQ(sites_of(src, "apply_bias_twice"),
            (std::vector<std::string>{"beta[b] -> beta[b] + beta[b]"}));
  EXPECT_EQ(sites_of(src, "scalar_instead_of_per_channel"),
            (std::vector<std::string>{"[b] -> [0]", "[b] -> [0]"}));
  EXPECT_EQ(sites_of(src, "omit_eps"), (std::vector<std::string>{" + 1e-6f -> "}));
}

TEST(mutation_rules, the_affine_moves_to_the_input_only_where_that_changes_the_formula) {
  const std::string src =
      "__global__ void k(const float* x, const float* w, const float* b, float* y, float m,\n"
      "                  float r, int n) {\n"
      "  for (int i = 0; i < n; ++i) y[i] = (x[i] - m) * r * w[i];\n"
      "  for (int i = 0; i < n; ++i) y[i] = x[i] * r * w[i] + b[i];\n"
      "  for (int i = 0; i < n; ++i) y[i] = x[i] * r * w[i];\n"
      "}";
  // A statistic subtracted, then a bias: both change the formula. A weight alone on a pure
  // scaling is the same product (x * w) * r: no site.
  EXPECT_EQ(sites_of(src, "apply_before_normalization"),
            (std::vector<std::string>{"x[i] - m) * r * w[i] -> (x[i] * w[i]) - m) * r",
                                      "x[i] * r * w[i] + b[i] -> (x[i] * w[i] + b[i]) * r"}));
}

TEST(mutation_rules, declarators_are_not_subscripts_and_host_code_keeps_its_indices) {
  const std::string src = "struct part { float m[4]; };\n"
                          "__global__ void k(float* y) {\n"
                          "  __shared__ float s[32]; float a[2], b[2]; part p[1];\n"
                          "  s[threadIdx.x] = y[0]; a[0] = b[1] = p[0].m[1];\n"
                          "}\n"
                          "int host(int* in) { return in[1]; }";
  EXPECT_EQ(sites_of(src, "index_plus_one"),
            (std::vector<std::string>{"[threadIdx.x] -> [(threadIdx.x) + 1]", "[0] -> [(0) + 1]",
                                      "[0] -> [(0) + 1]", "[1] -> [(1) + 1]", "[0] -> [(0) + 1]",
                                      "[1] -> [(1) + 1]"}));
}

TEST(mutation_rules, guards_loops_and_reductions) {
  const std::string src =
      "__device__ float r(float v) {\n"
      "  for (int o = warpSize / 2; o > 0; o >>= 1) v += __shfl_down_sync("
      "0xFFFFFFFF, v, o);\n"
      "  for (int o = 1; o < 32; o *= 2) v += __shfl_up_sync(0xffffffffu, v, o);\n"
      "  return v; }\n"
      "__global__ void k(float* y, int n) {\n"
      "  for (int i = n; i > 0; --i) { if (i == 3) continue; else if (i > n) "
      "break; y[i] = r(y[i]); }\n"
      "}";
  EXPECT_EQ(sites_of(src, "drop_reduction_step"),
            (std::vector<std::string>{"warpSize / 2 -> (warpSize / 2) / 2", "1 -> 2"}));
  EXPECT_EQ(sites_of(src, "skip_first_iteration"), (std::vector<std::string>{"n -> (n) - 1"}));
  EXPECT_EQ(sites_of(src, "skip_last_iteration"),
            (std::vector<std::string>{"0 -> (0) + 1", "32 -> (32) - 1", "0 -> (0) + 1"}));
  EXPECT_EQ(sites_of(src, "wrong_shuffle_mask"),
            (std::vector<std::string>{"0xFFFFFFFF -> 0x0000ffffu", "0xffffffffu -> 0x0000ffffu"}));
  EXPECT_EQ(sites_of(src, "guard_removal"),
            (std::vector<std::string>{"if (i == 3) -> if (false)", "if (i > n) break; -> ;"}));
  EXPECT_EQ(sites_of(src, "tail_skip"), (std::vector<std::string>{"n -> (n) - 1"}));
  EXPECT_EQ(sites_of(src, "early_return"), (std::vector<std::string>{"{ -> { return;"}));
}
