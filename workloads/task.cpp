#include "workloads/task.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <system_error>
#include <vector>

#include "base/rng.h"
#include "workloads/generators.h"

namespace kg {
namespace {

// Shunting-yard over + - * / ( ), unary minus, numbers and dimension symbols: two explicit stacks
// and no recursion, so no input can exhaust the call stack.
struct expr_parser {
  const std::string& s;
  const std::map<std::string, std::int64_t>& dims;
  std::size_t i = 0;
  std::vector<double> values;
  std::vector<char> ops; // + - * / ( and 'n' (unary minus)

  [[noreturn]] void fail(const std::string& why) const {
    throw std::invalid_argument("expression '" + s.substr(0, 80) + (s.size() > 80 ? "..." : "") +
                                "': " + why);
  }
  static int precedence(char op) { return op == 'n' ? 3 : (op == '*' || op == '/') ? 2 : 1; }
  void apply(char op) {
    if (op == 'n') {
      if (values.empty()) fail("ends early");
      values.back() = -values.back();
      return;
    }
    if (values.size() < 2) fail("ends early");
    const double r = values.back();
    values.pop_back();
    double& l = values.back();
    if (op == '/' && r == 0) fail("division by zero");
    l = op == '+' ? l + r : op == '-' ? l - r : op == '*' ? l * r : l / r;
  }
  double number() {
    std::size_t j = i;
    while (j < s.size() &&
           (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '.' || s[j] == 'e' ||
            s[j] == 'E' ||
            ((s[j] == '+' || s[j] == '-') && j > i && (s[j - 1] == 'e' || s[j - 1] == 'E'))))
      ++j;
    double v = 0;
    const auto [p, ec] = std::from_chars(s.data() + i, s.data() + j, v);
    if (ec == std::errc::result_out_of_range) fail("a number out of range");
    if (ec != std::errc() || p != s.data() + j) fail("a malformed number");
    i = j;
    return v;
  }
  double run() {
    bool operand = true; // expecting an operand (or a unary minus / opening parenthesis)
    for (;;) {
      while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])))
        ++i;
      if (i >= s.size()) break;
      const char c = s[i];
      if (operand) {
        if (c == '-') {
          ops.push_back('n');
          ++i;
        } else if (c == '(') {
          ops.push_back('(');
          ++i;
        } else if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
          values.push_back(number());
          operand = false;
        } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
          const std::size_t b = i;
          while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_'))
            ++i;
          const std::string name = s.substr(b, i - b);
          const auto it = dims.find(name);
          if (it == dims.end()) fail("unknown dimension '" + name.substr(0, 40) + "'");
          values.push_back(static_cast<double>(it->second));
          operand = false;
        } else {
          fail(std::string("unexpected '") + c + "'");
        }
        if (ops.size() > 100000) fail("nested too deep");
        continue;
      }
      if (c == ')') {
        while (!ops.empty() && ops.back() != '(')
          apply(pop());
        if (ops.empty()) fail("unmatched ')'");
        ops.pop_back();
        ++i;
      } else if (c == '+' || c == '-' || c == '*' || c == '/') {
        while (!ops.empty() && ops.back() != '(' && precedence(ops.back()) >= precedence(c))
          apply(pop());
        ops.push_back(c);
        operand = true;
        ++i;
      } else {
        fail("trailing '" + s.substr(i, 40) + "'");
      }
    }
    if (operand) fail("ends early");
    while (!ops.empty()) {
      if (ops.back() == '(') fail("missing ')'");
      apply(pop());
    }
    if (values.size() != 1) fail("ends early");
    return values.back();
  }
  char pop() {
    const char op = ops.back();
    ops.pop_back();
    return op;
  }
};

} // namespace

double eval_dim_expr(const std::string& expr, const std::map<std::string, std::int64_t>& dims) {
  expr_parser p{expr, dims, 0, {}, {}};
  const double v = p.run();
  if (!std::isfinite(v)) p.fail("the value is not finite");
  return v;
}

std::int64_t resolve_dim(const std::string& dim, const task_shape& shape) {
  if (!dim.empty() && std::isdigit(static_cast<unsigned char>(dim[0]))) {
    std::int64_t v = 0;
    const auto [p, ec] = std::from_chars(dim.data(), dim.data() + dim.size(), v);
    if (ec == std::errc::result_out_of_range)
      throw std::invalid_argument("dimension '" + dim.substr(0, 40) + "' is out of range");
    if (ec != std::errc() || p != dim.data() + dim.size())
      throw std::invalid_argument("dimension '" + dim.substr(0, 40) + "' is not a whole number");
    return v;
  }
  const auto it = shape.dims.find(dim);
  if (it == shape.dims.end())
    throw std::invalid_argument("dimension '" + dim.substr(0, 40) + "' is not defined by shape '" +
                                shape.name + "'");
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
        x.set(k, regime.normal_weights_only                            ? r.normal()
                 : regime.identity_params || regime.normal_biases_only ? 1.0
                 : regime.normal_params                                ? r.normal()
                                                                       : 1.0 + 0.1 * r.normal());
    } else if (in.role == "bias") {
      for (std::int64_t k = 0; k < n; ++k)
        x.set(k, regime.normal_biases_only                              ? r.normal()
                 : regime.identity_params || regime.normal_weights_only ? 0.0
                 : regime.normal_params                                 ? r.normal()
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
