#include "workloads/generators.h"
#include "base/name_table.h"

#include <stdexcept>

#include "base/rng.h"

namespace kg {

std::string_view activation_kind_name(activation_kind k) {
  return k == activation_kind::normal ? "normal" : "uniform01";
}

namespace {

constexpr name_table<param_regime, 3> param_regime_names{{
    {param_regime::identity, "identity"},
    {param_regime::varied, "varied"},
    {param_regime::normal, "normal"},
}};

} // namespace

std::string_view param_regime_name(param_regime r) {
  return name_of(param_regime_names, r);
}

host_tensor make_activation(dtype t, std::vector<std::int64_t> shape, activation_kind kind,
                            std::uint64_t seed, std::string_view role) {
  host_tensor out(t, std::move(shape));
  rng r(seed, stream_id(role));
  for (std::int64_t i = 0; i < out.numel(); ++i)
    out.set(i, kind == activation_kind::normal ? r.normal() : r.uniform01());
  return out;
}

host_tensor scaled(const host_tensor& t, double factor) {
  host_tensor out(t.type, t.shape);
  for (std::int64_t i = 0; i < t.numel(); ++i)
    out.set(i, t.at(i) * factor);
  return out;
}

static host_tensor make_param(dtype t, std::int64_t n, param_regime regime, std::uint64_t seed,
                              std::string_view role, double identity_value) {
  host_tensor out(t, {n});
  rng r(seed, stream_id(role));
  for (std::int64_t i = 0; i < n; ++i) {
    switch (regime) {
    case param_regime::identity:
      out.set(i, identity_value);
      break;
    case param_regime::varied:
      out.set(i, identity_value + 0.1 * r.normal());
      break;
    case param_regime::normal:
      out.set(i, r.normal());
      break;
    }
  }
  return out;
}

host_tensor make_norm_weight(dtype t, std::int64_t n, param_regime regime, std::uint64_t seed,
                             std::string_view role) {
  return make_param(t, n, regime, seed, role, 1.0);
}

host_tensor make_norm_bias(dtype t, std::int64_t n, param_regime regime, std::uint64_t seed,
                           std::string_view role) {
  return make_param(t, n, regime, seed, role, 0.0);
}

host_tensor make_indices(dtype t, std::vector<std::int64_t> shape, std::int64_t upper,
                         std::uint64_t seed, std::string_view role) {
  if (t != dtype::int32 && t != dtype::int64)
    throw std::invalid_argument("indices must be int32 or int64");
  if (upper <= 0) throw std::invalid_argument("indices need a positive upper bound");
  host_tensor out(t, std::move(shape));
  rng r(seed, stream_id(role));
  for (std::int64_t i = 0; i < out.numel(); ++i)
    out.set(i, static_cast<double>(r.below(static_cast<std::uint64_t>(upper))));
  return out;
}

} // namespace kg
