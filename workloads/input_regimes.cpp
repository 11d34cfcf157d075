#include "workloads/input_regimes.h"
#include "base/name_table.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace kg {
namespace {

constexpr name_table<regime_kind, 7> kind_names{{
    {regime_kind::normal, "normal"},
    {regime_kind::scaled, "scaled"},
    {regime_kind::shifted, "shifted"},
    {regime_kind::low_variance, "low_variance"},
    {regime_kind::ties, "ties"},
    {regime_kind::tail_extreme, "tail_extreme"},
    {regime_kind::special, "special"},
}};

// 10^k is exact in double for |k| <= 22 (5^22 < 2^53), so a row's scale never depends on how a
// platform's pow rounds; 10^-k is then one correctly rounded division.
constexpr int max_abs_exp = 22;

double power_of_ten(int k) {
  double p = 1;
  for (int i = 0; i < std::abs(k); ++i)
    p *= 10;
  return k >= 0 ? p : 1 / p;
}

// Rows are the last dimension; a scalar is one row of one element.
std::pair<std::int64_t, std::int64_t> rows_cols(const host_tensor& x) {
  const std::int64_t cols = x.shape.empty() ? 1 : x.shape.back();
  return {cols > 0 ? x.numel() / cols : 0, cols};
}

// The spans that get one scale, shift or mean: rows, except that a vector (one dimension, the
// operand of an elementwise op) is cut into spans of 1024 (the last one shorter), so one draw
// of an elementwise task still covers every exponent and many shifts. Returns the span length.
std::int64_t span_of(const host_tensor& x) {
  const auto [rows, cols] = rows_cols(x);
  return x.shape.size() == 1 ? std::min<std::int64_t>(cols, 1024) : cols;
}

// A uniform position in [0, n) that is none of `taken` (distinct positions, each < n).
std::int64_t pick_excluding(std::int64_t n, std::vector<std::int64_t> taken, rng& r) {
  std::sort(taken.begin(), taken.end());
  std::int64_t p = static_cast<std::int64_t>(r.below(static_cast<std::uint64_t>(n) - taken.size()));
  for (const std::int64_t t : taken)
    if (p >= t) ++p;
  return p;
}

std::int64_t first_max(const host_tensor& x, std::int64_t base, std::int64_t cols) {
  std::int64_t best = 0;
  for (std::int64_t c = 1; c < cols; ++c)
    if (x.at(base + c) > x.at(base + best)) best = c;
  return best;
}

std::int64_t first_min(const host_tensor& x, std::int64_t base, std::int64_t cols) {
  std::int64_t best = 0;
  for (std::int64_t c = 1; c < cols; ++c)
    if (x.at(base + c) < x.at(base + best)) best = c;
  return best;
}

void swap_elements(host_tensor& x, std::int64_t a, std::int64_t b) {
  const double va = x.at(a); // at/set round-trip exactly: the values are already x's dtype
  x.set(a, x.at(b));
  x.set(b, va);
}

void fill_normal(host_tensor& x, rng& r) {
  for (std::int64_t k = 0; k < x.numel(); ++k)
    x.set(k, r.normal());
}

// The exponents of one tensor in a random order (Fisher-Yates); rows take them cyclically, so
// every exponent appears once rows >= the range's size.
std::vector<int> shuffled_exponents(const regime_spec& spec, rng& r) {
  std::vector<int> e;
  for (int k = spec.min_exp; k <= spec.max_exp; ++k)
    e.push_back(k);
  for (std::size_t i = e.size(); i > 1; --i)
    std::swap(e[i - 1], e[r.below(i)]);
  return e;
}

void fill_scaled(host_tensor& x, const regime_spec& spec, rng& r) {
  const std::int64_t cols = span_of(x), n = x.numel();
  const std::int64_t rows = cols > 0 ? (n + cols - 1) / cols : 0;
  const auto exps = shuffled_exponents(spec, r);
  for (std::int64_t row = 0; row < rows; ++row) {
    const double f = power_of_ten(exps[static_cast<std::size_t>(row) % exps.size()]);
    for (std::int64_t c = 0; c < cols && row * cols + c < n; ++c)
      x.set(row * cols + c, f * r.normal());
  }
}

double random_sign(rng& r) {
  return r.below(2) ? -1.0 : 1.0;
}

void fill_shifted(host_tensor& x, const regime_spec& spec, rng& r) {
  const std::int64_t cols = span_of(x), n = x.numel();
  const std::int64_t rows = cols > 0 ? (n + cols - 1) / cols : 0;
  const double lo = std::log10(spec.min_shift), hi = std::log10(spec.max_shift);
  for (std::int64_t row = 0; row < rows; ++row) {
    const double s = std::pow(10.0, lo + (hi - lo) * r.uniform01());
    const double shift = random_sign(r) * s;
    for (std::int64_t c = 0; c < cols && row * cols + c < n; ++c)
      x.set(row * cols + c, shift + r.normal());
  }
}

void fill_low_variance(host_tensor& x, const regime_spec& spec, rng& r) {
  const std::int64_t cols = span_of(x), n = x.numel();
  const std::int64_t rows = cols > 0 ? (n + cols - 1) / cols : 0;
  for (std::int64_t row = 0; row < rows; ++row) {
    const double m = std::pow(10.0, r.uniform01());
    const double mean = random_sign(r) * m, sd = spec.relative_sd * m;
    for (std::int64_t c = 0; c < cols && row * cols + c < n; ++c)
      x.set(row * cols + c, mean + sd * r.normal());
  }
}

// The maximum copied to a second position (not the minimum's), then the minimum to a third: both
// extremes of the row occur twice, the copy before or after the original at random. A row too
// short for both keeps what fits (cols 2 or 3: the maximum's tie only).
void fill_ties(host_tensor& x, rng& r) {
  fill_normal(x, r);
  const auto [rows, cols] = rows_cols(x);
  if (cols < 2) return;
  for (std::int64_t row = 0; row < rows; ++row) {
    const std::int64_t base = row * cols;
    const std::int64_t hi = first_max(x, base, cols), lo = first_min(x, base, cols);
    if (hi == lo) continue; // every element equal: tied already
    const std::int64_t hi_copy = cols >= 3 ? pick_excluding(cols, {hi, lo}, r) : lo;
    x.set(base + hi_copy, x.at(base + hi));
    if (cols < 4) continue;
    const std::int64_t lo_copy = pick_excluding(cols, {hi, lo, hi_copy}, r);
    x.set(base + lo_copy, x.at(base + lo));
  }
}

// The row's maximum swapped into partial_tail(cols), then its minimum into another tail
// position: a kernel that drops or mishandles the last partial block loses the row's extremes.
// A one-element tail holds the maximum on even rows and the minimum on odd rows.
void fill_tail_extreme(host_tensor& x, rng& r) {
  fill_normal(x, r);
  const auto [rows, cols] = rows_cols(x);
  const auto [tb, te] = partial_tail(cols);
  const std::int64_t len = te - tb;
  if (len <= 0) return;
  const auto in_tail = [&](std::int64_t c) { return c >= tb && c < te; };
  for (std::int64_t row = 0; row < rows; ++row) {
    const std::int64_t base = row * cols;
    std::int64_t max_at = -1;
    if (len >= 2 || row % 2 == 0) {
      max_at = first_max(x, base, cols);
      if (!in_tail(max_at)) {
        const std::int64_t p =
            tb + static_cast<std::int64_t>(r.below(static_cast<std::uint64_t>(len)));
        swap_elements(x, base + max_at, base + p);
        max_at = p;
      }
    }
    if (len >= 2 || row % 2 == 1) {
      const std::int64_t min_at = first_min(x, base, cols);
      if (in_tail(min_at) && min_at != max_at) continue;
      const std::int64_t p =
          max_at >= 0 ? tb + pick_excluding(len, {max_at - tb}, r)
                      : tb + static_cast<std::int64_t>(r.below(static_cast<std::uint64_t>(len)));
      swap_elements(x, base + min_at, base + p);
    }
  }
}

// A nonzero subnormal of t with a random sign. float32: k 2^-149 with k in [1, 2^20]; bfloat16
// shares float32's exponent, so the same value rounded stays subnormal, with k >= 2^16 so that it
// does not round to zero (bf16's smallest subnormal is 2^-133); float16: m 2^-24, m in [1, 1023].
double subnormal(dtype t, rng& r) {
  double v = 0;
  switch (t) {
  case dtype::float16:
    v = std::ldexp(static_cast<double>(1 + r.below(1023)), -24);
    break;
  case dtype::bfloat16:
    v = std::ldexp(static_cast<double>((1u << 16) + r.below((1u << 20) - (1u << 16) + 1)), -149);
    break;
  case dtype::float64:
    v = std::ldexp(static_cast<double>(1 + r.below(1u << 20)), -1074);
    break;
  default: // float32
    v = std::ldexp(static_cast<double>(1 + r.below(1u << 20)), -149);
  }
  return random_sign(r) * v;
}

// N(0,1) with about one element in 8 replaced: +0, -0, or a subnormal of either sign (one in 16
// each of +0 and -0, one in 16 subnormal). Kernels compiled to flush subnormals to zero, or that
// lose the sign of zero (1/x, copysign, atan2 downstream), see them.
void fill_special(host_tensor& x, rng& r) {
  for (std::int64_t k = 0; k < x.numel(); ++k) {
    double v = r.normal();
    if (r.below(8) == 0) {
      const auto pick = r.below(4);
      v = pick == 0 ? 0.0 : pick == 1 ? -0.0 : subnormal(x.type, r);
    }
    x.set(k, v);
  }
}

std::string number(double v) {
  std::ostringstream o;
  o << std::setprecision(15) << v;
  return o.str();
}

[[noreturn]] void bad(const std::string& why) {
  throw std::invalid_argument("regime: " + why);
}

int exponent_of(const nlohmann::json& v, const std::string& key) {
  if (!v.is_number_integer()) bad("'" + key + "' must be an integer, not " + v.dump());
  const auto k = v.get<std::int64_t>();
  if (k < -max_abs_exp || k > max_abs_exp)
    bad("'" + key + "' " + std::to_string(k) + " is outside [-22, 22]");
  return static_cast<int>(k);
}

double positive_of(const nlohmann::json& v, const std::string& key) {
  if (!v.is_number()) bad("'" + key + "' must be a number, not " + v.dump());
  const double d = v.get<double>();
  if (!(d > 0) || !std::isfinite(d))
    bad("'" + key + "' must be positive and finite, not " + v.dump());
  return d;
}

std::map<dtype, regime_tolerance> tolerance_of(const nlohmann::json& j) {
  if (!j.is_object()) bad("'tolerance' must be an object {dtype: {atol, rtol}}");
  std::map<dtype, regime_tolerance> out;
  for (const auto& [name, v] : j.items()) {
    const auto t = parse_dtype(name);
    if (!t || !is_floating(*t)) bad("'tolerance' names '" + name + "', not a floating dtype");
    if (!v.is_object() || v.size() != 2 || !v.contains("atol") || !v.contains("rtol"))
      bad("'tolerance." + name + "' must be exactly {\"atol\", \"rtol\"}");
    regime_tolerance tol;
    for (auto [key, dst] : {std::pair{"atol", &tol.atol}, std::pair{"rtol", &tol.rtol}}) {
      const auto& x = v.at(key);
      if (!x.is_number() || !(x.get<double>() >= 0) || !std::isfinite(x.get<double>()))
        bad("'tolerance." + name + "." + key + "' must be a finite number >= 0");
      *dst = x.get<double>();
    }
    out[*t] = tol;
  }
  return out;
}

// The parameters a kind takes besides "name" and "tolerance".
bool takes(regime_kind k, const std::string& key) {
  switch (k) {
  case regime_kind::scaled:
    return key == "min_exp" || key == "max_exp";
  case regime_kind::shifted:
    return key == "min_shift" || key == "max_shift";
  case regime_kind::low_variance:
    return key == "relative_sd";
  default:
    return false;
  }
}

} // namespace

std::string_view regime_name(regime_kind k) {
  return name_of(kind_names, k);
}

std::optional<regime_kind> parse_regime_kind(std::string_view name) {
  return parse_name(kind_names, name);
}

nlohmann::json regime_spec::to_json() const {
  nlohmann::json j = {{"name", name()}};
  if (kind == regime_kind::scaled) {
    j["min_exp"] = min_exp;
    j["max_exp"] = max_exp;
  } else if (kind == regime_kind::shifted) {
    j["min_shift"] = min_shift;
    j["max_shift"] = max_shift;
  } else if (kind == regime_kind::low_variance) {
    j["relative_sd"] = relative_sd;
  }
  if (!tolerance.empty()) {
    auto& t = j["tolerance"] = nlohmann::json::object();
    for (const auto& [type, tol] : tolerance)
      t[std::string(dtype_name(type))] = {{"atol", tol.atol}, {"rtol", tol.rtol}};
  }
  return j;
}

std::vector<regime_spec> default_regimes() {
  std::vector<regime_spec> out;
  for (const auto& [kind, name] : kind_names) {
    regime_spec spec;
    spec.kind = kind;
    out.push_back(spec);
  }
  return out;
}

regime_spec parse_regime(const nlohmann::json& j) {
  if (!j.is_string() && !j.is_object())
    bad("an entry is a name or an object with \"name\", not " + j.dump());
  if (j.is_object() && (!j.contains("name") || !j.at("name").is_string()))
    bad("an object entry needs a string \"name\": " + j.dump());
  const std::string name = j.is_string() ? j.get<std::string>() : j.at("name").get<std::string>();
  const auto kind = parse_regime_kind(name);
  if (!kind) bad("unknown regime '" + name + "'");
  regime_spec spec;
  spec.kind = *kind;
  if (j.is_string()) return spec;
  for (const auto& [key, v] : j.items()) {
    if (key == "name") continue;
    if (key == "tolerance") {
      spec.tolerance = tolerance_of(v);
      continue;
    }
    if (!takes(*kind, key)) bad("'" + name + "' takes no parameter '" + key + "'");
    if (key == "min_exp") spec.min_exp = exponent_of(v, key);
    if (key == "max_exp") spec.max_exp = exponent_of(v, key);
    if (key == "min_shift") spec.min_shift = positive_of(v, key);
    if (key == "max_shift") spec.max_shift = positive_of(v, key);
    if (key == "relative_sd") spec.relative_sd = positive_of(v, key);
  }
  if (spec.min_exp > spec.max_exp)
    bad("'" + name + "': min_exp " + std::to_string(spec.min_exp) + " > max_exp " +
        std::to_string(spec.max_exp));
  if (spec.min_shift > spec.max_shift)
    bad("'" + name + "': min_shift " + number(spec.min_shift) + " > max_shift " +
        number(spec.max_shift));
  return spec;
}

void fill_activation(host_tensor& x, const regime_spec& spec, rng& r) {
  if (!is_floating(x.type))
    throw std::invalid_argument("fill_activation: " + std::string(dtype_name(x.type)) +
                                " is not a floating dtype");
  switch (spec.kind) {
  case regime_kind::normal:
    return fill_normal(x, r); // exactly the default activation draw: same stream, same order
  case regime_kind::scaled:
    return fill_scaled(x, spec, r);
  case regime_kind::shifted:
    return fill_shifted(x, spec, r);
  case regime_kind::low_variance:
    return fill_low_variance(x, spec, r);
  case regime_kind::ties:
    return fill_ties(x, r);
  case regime_kind::tail_extreme:
    return fill_tail_extreme(x, r);
  case regime_kind::special:
    return fill_special(x, r);
  }
}

std::pair<std::int64_t, std::int64_t> partial_tail(std::int64_t cols) {
  if (cols <= 0) return {0, 0};
  const std::int64_t rem = cols % 32;
  // The last partial block of every power-of-two block size B >= 32 is [cols - cols % B, cols),
  // and each contains [cols - cols % 32, cols): those elements are in the tail whatever the
  // kernel's block size. With cols % 32 == 0 the 32-block has no tail; the last element is the
  // last one of every block size's last block.
  return rem != 0 ? std::pair{cols - rem, cols} : std::pair{cols - 1, cols};
}

} // namespace kg
