#include "workloads/task.h"

#include <cctype>
#include <cmath>
#include <stdexcept>

#include "workloads/generators.h"
#include "workloads/rng.h"

namespace kg {
namespace {

// Recursive descent: expr = term {(+|-) term}; term = factor {(*|/) factor};
// factor = number | symbol | ( expr ) | - factor.
struct expr_parser {
  const std::string& s;
  const std::map<std::string, std::int64_t>& dims;
  std::size_t i = 0;

  [[noreturn]] void fail(const std::string& why) const {
    throw std::invalid_argument("expression '" + s + "': " + why);
  }
  void skip() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])))
      ++i;
  }
  double expr() {
    double v = term();
    for (skip(); i < s.size() && (s[i] == '+' || s[i] == '-'); skip()) {
      const char op = s[i++];
      const double r = term();
      v = op == '+' ? v + r : v - r;
    }
    return v;
  }
  double term() {
    double v = factor();
    for (skip(); i < s.size() && (s[i] == '*' || s[i] == '/'); skip()) {
      const char op = s[i++];
      const double r = factor();
      if (op == '/' && r == 0) fail("division by zero");
      v = op == '*' ? v * r : v / r;
    }
    return v;
  }
  double factor() {
    skip();
    if (i >= s.size()) fail("ends early");
    if (s[i] == '-') {
      ++i;
      return -factor();
    }
    if (s[i] == '(') {
      ++i;
      const double v = expr();
      skip();
      if (i >= s.size() || s[i] != ')') fail("missing ')'");
      ++i;
      return v;
    }
    if (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.') {
      std::size_t used = 0;
      const double v = std::stod(s.substr(i), &used);
      i += used;
      return v;
    }
    if (std::isalpha(static_cast<unsigned char>(s[i])) || s[i] == '_') {
      const std::size_t b = i;
      while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_'))
        ++i;
      const std::string name = s.substr(b, i - b);
      const auto it = dims.find(name);
      if (it == dims.end()) fail("unknown dimension '" + name + "'");
      return static_cast<double>(it->second);
    }
    fail(std::string("unexpected '") + s[i] + "'");
  }
};

} // namespace

double eval_dim_expr(const std::string& expr, const std::map<std::string, std::int64_t>& dims) {
  expr_parser p{expr, dims};
  const double v = p.expr();
  p.skip();
  if (p.i != expr.size()) p.fail("trailing '" + expr.substr(p.i) + "'");
  return v;
}

std::int64_t resolve_dim(const std::string& dim, const task_shape& shape) {
  if (!dim.empty() && std::isdigit(static_cast<unsigned char>(dim[0]))) return std::stoll(dim);
  const auto it = shape.dims.find(dim);
  if (it == shape.dims.end())
    throw std::invalid_argument("dimension '" + dim + "' is not defined by shape '" + shape.name +
                                "'");
  return it->second;
}

std::vector<std::int64_t> resolve_shape(const task_tensor& t, const task_shape& shape) {
  std::vector<std::int64_t> out;
  for (const auto& d : t.shape)
    out.push_back(resolve_dim(d, shape));
  return out;
}

std::vector<host_tensor> make_task_inputs(const task_def& t, const task_shape& shape,
                                          std::uint64_t seed) {
  return make_task_inputs(t, shape, seed, task_input_regime{});
}

std::vector<host_tensor> make_task_inputs(const task_def& t, const task_shape& shape,
                                          std::uint64_t seed, const task_input_regime& regime) {
  const regime_spec* strict = nullptr;
  if (regime.strict_regime >= 0) {
    if (static_cast<std::size_t>(regime.strict_regime) >= t.regimes.size())
      throw std::out_of_range("task '" + t.id + "': strict_regime " +
                              std::to_string(regime.strict_regime) + " but the task has " +
                              std::to_string(t.regimes.size()) + " regimes");
    if (regime.uniform01_activations || regime.scale != 1.0)
      throw std::invalid_argument("task '" + t.id +
                                  "': strict_regime replaces the activation draw; it does not "
                                  "combine with uniform01_activations or a scale");
    strict = &t.regimes[static_cast<std::size_t>(regime.strict_regime)];
  }
  std::vector<host_tensor> out;
  for (const auto& in : t.inputs) {
    const auto dims = resolve_shape(in, shape);
    const std::uint64_t s = seed ^ stream_id(t.id + "/" + shape.name + "/" + in.name);
    host_tensor x(in.type, dims);
    rng r(s, stream_id(in.role));
    const std::int64_t n = x.numel();
    if (in.role == "indices") {
      const std::int64_t upper = resolve_dim(in.upper, shape);
      x = make_indices(in.type, dims, upper, s, in.name);
    } else if (in.role == "weight") {
      for (std::int64_t k = 0; k < n; ++k)
        x.set(k, regime.identity_params ? 1.0
                 : regime.normal_params ? r.normal()
                                        : 1.0 + 0.1 * r.normal());
    } else if (in.role == "bias") {
      for (std::int64_t k = 0; k < n; ++k)
        x.set(k, regime.identity_params ? 0.0
                 : regime.normal_params ? r.normal()
                                        : 0.1 * r.normal());
    } else if (in.role == "matrix") {
      const double scale = 1.0 / std::sqrt(static_cast<double>(dims.back()));
      for (std::int64_t k = 0; k < n; ++k)
        x.set(k, scale * r.normal());
    } else if (in.role == "uniform01") {
      for (std::int64_t k = 0; k < n; ++k)
        x.set(k, r.uniform01());
    } else if (in.role == "positive") {
      for (std::int64_t k = 0; k < n; ++k)
        x.set(k, 0.5 + 1.5 * r.uniform01());
    } else if (in.role == "mask") {
      for (std::int64_t k = 0; k < n; ++k)
        x.set(k, static_cast<double>(r.below(2)));
    } else if (strict && is_floating(in.type)) { // activation in a strict regime
      fill_activation(x, *strict, r);
    } else { // activation
      for (std::int64_t k = 0; k < n; ++k)
        x.set(k, regime.scale * (regime.uniform01_activations ? r.uniform01() : r.normal()));
    }
    out.push_back(std::move(x));
  }
  return out;
}

} // namespace kg
