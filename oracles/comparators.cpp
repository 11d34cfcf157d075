#include "oracles/comparators.h"
#include "base/name_table.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

namespace kg {

namespace {

constexpr name_table<comparator_kind, 6> comparator_names{{
    {comparator_kind::allclose, "allclose"},
    {comparator_kind::matched_ratio, "matched_ratio"},
    {comparator_kind::both_exceed, "both_exceed"},
    {comparator_kind::bitwise, "bitwise"},
    {comparator_kind::relative_norm, "relative_norm"},
    {comparator_kind::oracle_bound, "oracle_bound"},
}};

} // namespace

std::string_view comparator_kind_name(comparator_kind k) {
  return name_of(comparator_names, k);
}

nlohmann::json comparator_spec::to_json() const {
  nlohmann::json j = {{"kind", comparator_kind_name(kind)}};
  switch (kind) {
  case comparator_kind::allclose:
    j["atol"] = atol;
    j["rtol"] = rtol;
    j["tolerance_side"] = side == tolerance_side::reference ? "reference" : "candidate";
    break;
  case comparator_kind::matched_ratio:
  case comparator_kind::both_exceed:
    j["atol"] = atol;
    j["rtol"] = rtol;
    j["required_ratio"] = required_ratio;
    break;
  case comparator_kind::relative_norm:
    j["norm_tol"] = norm_tol;
    break;
  case comparator_kind::oracle_bound:
    j["oracle_factor"] = oracle_factor;
    j["oracle_floor_ulps"] = oracle_floor_ulps;
    break;
  case comparator_kind::bitwise:
    break;
  }
  return j;
}

nlohmann::json compare_result::to_json() const {
  auto finite_or_null = [](double v) -> nlohmann::json {
    return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
  };
  return {{"pass", pass},
          {"reason", reason},
          {"max_abs_err", finite_or_null(max_abs_err)},
          {"max_rel_err", finite_or_null(max_rel_err)},
          {"matched_ratio", matched_ratio},
          {"mismatches", mismatches},
          {"first_mismatch", first_mismatch},
          {"numel", numel},
          {"relative_norm_err", finite_or_null(relative_norm_err)}};
}

namespace {

constexpr double rel_floor = 1e-12;

// Fills the statistics every comparator reports; `element_ok(i, r, c)` is the comparator's own
// element rule. Returns false if shapes differ (result already marked). The dtypes are
// dispatched once per tensor (with_element_reader), not per element.
template <class element_rule>
bool scan(const host_tensor& ref, const host_tensor& cand, compare_result& res,
          const element_rule& element_ok) {
  res.numel = ref.numel();
  if (ref.shape != cand.shape) {
    res.pass = false;
    res.reason = "shape_mismatch";
    res.first_mismatch = 0;
    return false;
  }
  with_element_reader(ref, [&](auto ref_at) {
    with_element_reader(cand, [&](auto cand_at) {
      double diff2 = 0.0, ref2 = 0.0;
      std::int64_t matched = 0;
      for (std::int64_t i = 0; i < res.numel; ++i) {
        const double r = ref_at(i), c = cand_at(i);
        if (std::isfinite(r) && std::isfinite(c)) {
          const double d = std::fabs(r - c);
          res.max_abs_err = std::max(res.max_abs_err, d);
          res.max_rel_err = std::max(res.max_rel_err, d / std::max(std::fabs(r), rel_floor));
          diff2 += d * d;
          ref2 += r * r;
        }
        if (element_ok(i, r, c)) {
          ++matched;
        } else {
          ++res.mismatches;
          if (res.first_mismatch < 0) res.first_mismatch = i;
        }
      }
      res.matched_ratio =
          res.numel ? static_cast<double>(matched) / static_cast<double>(res.numel) : 1.0;
      res.relative_norm_err = ref2 > 0.0 ? std::sqrt(diff2 / ref2) : (diff2 > 0.0 ? INFINITY : 0.0);
    });
  });
  return true;
}

bool any_nonfinite(const host_tensor& t) {
  return with_element_reader(t, [&](auto at) {
    for (std::int64_t i = 0; i < t.numel(); ++i)
      if (!std::isfinite(at(i))) return true;
    return false;
  });
}

} // namespace

namespace {

// allclose's element rule, shared by the full comparison and the first-mismatch search.
inline bool allclose_element(double r, double c, double atol, double rtol, tolerance_side side) {
  if (std::isnan(r) || std::isnan(c)) return false; // equal_nan=False
  if (r == c) return true;                          // equal infinities
  if (!std::isfinite(r) || !std::isfinite(c)) return false;
  const double s = side == tolerance_side::candidate ? std::fabs(c) : std::fabs(r);
  return std::fabs(r - c) <= atol + rtol * s;
}

void check_extra(const host_tensor& ref, const host_tensor* extra_atol) {
  if (extra_atol && extra_atol->numel() != ref.numel())
    throw std::invalid_argument("compare_allclose: extra_atol has " +
                                std::to_string(extra_atol->numel()) + " elements, ref " +
                                std::to_string(ref.numel()));
}

} // namespace

compare_result compare_allclose(const host_tensor& ref, const host_tensor& cand, double atol,
                                double rtol, tolerance_side side, const host_tensor* extra_atol) {
  compare_result res;
  check_extra(ref, extra_atol);
  if (!scan(ref, cand, res, [&](std::int64_t i, double r, double c) {
        const double extra = extra_atol ? extra_atol->at(i) : 0.0; // (rare: a second pass)
        return allclose_element(r, c, atol + extra, rtol, side);
      }))
    return res;
  res.pass = res.mismatches == 0;
  if (!res.pass) res.reason = "tolerance";
  return res;
}

std::int64_t first_allclose_mismatch(const host_tensor& ref, const host_tensor& cand, double atol,
                                     double rtol, tolerance_side side,
                                     const host_tensor* extra_atol) {
  check_extra(ref, extra_atol);
  if (ref.shape != cand.shape) return 0; // (compare_allclose's first_mismatch for it too)
  return with_element_reader(ref, [&](auto ref_at) {
    return with_element_reader(cand, [&](auto cand_at) -> std::int64_t {
      for (std::int64_t i = 0; i < ref.numel(); ++i) {
        const double extra = extra_atol ? extra_atol->at(i) : 0.0;
        if (!allclose_element(ref_at(i), cand_at(i), atol + extra, rtol, side)) return i;
      }
      return -1;
    });
  });
}

compare_result compare_matched_ratio(const host_tensor& ref, const host_tensor& cand, double atol,
                                     double rtol, double required_ratio,
                                     bool allow_matching_neg_inf) {
  compare_result res;
  // SOL casts both to float32 and evaluates the element rule in float32 arithmetic.
  const float fa = static_cast<float>(atol), fr = static_cast<float>(rtol);
  if (!scan(ref, cand, res, [&](std::int64_t, double r, double c) {
        const float rf = static_cast<float>(r), cf = static_cast<float>(c);
        if (allow_matching_neg_inf && std::isinf(rf) && rf < 0 && rf == cf) return true;
        if (!std::isfinite(rf) || !std::isfinite(cf)) return false;
        return std::fabs(cf - rf) <= fa + fr * std::fabs(rf);
      }))
    return res;
  if (ref.type != cand.type) {
    res.pass = false;
    res.reason = "dtype_mismatch";
    return res;
  }
  bool nonfinite = false, cand_all_zero = true;
  double ref_norm2 = 0.0;
  with_element_reader(ref, [&](auto ref_at) {
    with_element_reader(cand, [&](auto cand_at) {
      for (std::int64_t i = 0; i < res.numel && !nonfinite; ++i) {
        const double r = ref_at(i), c = cand_at(i);
        const float rf = static_cast<float>(r), cf = static_cast<float>(c);
        const bool neg_inf_pair = allow_matching_neg_inf && std::isinf(rf) && rf < 0 && rf == cf;
        nonfinite = (!std::isfinite(rf) || !std::isfinite(cf)) && !neg_inf_pair;
        if (c != 0.0) cand_all_zero = false;
        ref_norm2 += r * r;
      }
    });
  });
  if (nonfinite) {
    res.pass = false;
    res.reason = "nonfinite";
    return res;
  }
  if (res.numel > 0 && cand_all_zero && ref_norm2 > 0.0) {
    res.pass = false;
    res.reason = "all_zero";
    return res;
  }
  res.pass = res.matched_ratio >= required_ratio;
  if (!res.pass) res.reason = "matched_ratio";
  return res;
}

compare_result compare_both_exceed(const host_tensor& ref, const host_tensor& cand, double atol,
                                   double rtol, double required_ratio) {
  compare_result res;
  if (!scan(ref, cand, res, [&](std::int64_t, double r, double c) {
        if (std::isnan(r) || std::isnan(c)) return false;
        if (r == c) return true;
        if (!std::isfinite(r) || !std::isfinite(c)) return false;
        const double a = std::fabs(r - c);
        const double rel = std::fabs(r) > 0.0 ? a / std::fabs(r) : INFINITY;
        return !(a > atol && rel > rtol);
      }))
    return res;
  res.pass = res.matched_ratio >= required_ratio;
  if (!res.pass) res.reason = "tolerance";
  return res;
}

compare_result compare_bitwise(const host_tensor& ref, const host_tensor& cand) {
  compare_result res;
  if (ref.type != cand.type) {
    res.numel = ref.numel();
    res.reason = ref.shape != cand.shape ? "shape_mismatch" : "dtype_mismatch";
    res.first_mismatch = 0;
    return res;
  }
  const std::size_t w = dtype_size(ref.type);
  if (!scan(ref, cand, res, [&](std::int64_t i, double, double) {
        return std::memcmp(ref.bytes.data() + i * w, cand.bytes.data() + i * w, w) == 0;
      }))
    return res;
  res.pass = res.mismatches == 0;
  if (!res.pass) res.reason = "bitwise";
  return res;
}

compare_result compare_relative_norm(const host_tensor& oracle, const host_tensor& cand,
                                     double tol) {
  compare_result res;
  if (!scan(oracle, cand, res,
            [](std::int64_t, double r, double c) { return std::isfinite(r) && std::isfinite(c); }))
    return res;
  if (any_nonfinite(cand)) {
    res.reason = "nonfinite";
    return res;
  }
  res.pass = res.relative_norm_err <= tol;
  if (!res.pass) res.reason = "relative_norm";
  return res;
}

double unit_roundoff(dtype t) {
  switch (t) {
  case dtype::float16:
    return 0x1.0p-11;
  case dtype::bfloat16:
    return 0x1.0p-8;
  case dtype::float64:
    return 0x1.0p-53;
  default:
    return 0x1.0p-24;
  }
}

derived_tolerance oracle_bound_tolerance(const host_tensor& ref, const host_tensor& oracle,
                                         double factor, double floor_ulps) {
  double e = 0.0, scale = 0.0;
  for (std::int64_t i = 0; i < oracle.numel(); ++i) {
    scale = std::max(scale, std::fabs(oracle.at(i)));
    if (i < ref.numel() && std::isfinite(ref.at(i)))
      e = std::max(e, std::fabs(ref.at(i) - oracle.at(i)));
  }
  const double u = unit_roundoff(ref.type);
  return {std::max(factor * e, floor_ulps * u * scale), floor_ulps * u, e};
}

compare_result compare(const comparator_spec& spec, const host_tensor& ref, const host_tensor& cand,
                       const host_tensor* oracle) {
  switch (spec.kind) {
  case comparator_kind::allclose:
    return compare_allclose(ref, cand, spec.atol, spec.rtol, spec.side);
  case comparator_kind::matched_ratio:
    return compare_matched_ratio(ref, cand, spec.atol, spec.rtol, spec.required_ratio);
  case comparator_kind::both_exceed:
    return compare_both_exceed(ref, cand, spec.atol, spec.rtol, spec.required_ratio);
  case comparator_kind::bitwise:
    return compare_bitwise(ref, cand);
  case comparator_kind::relative_norm:
    if (!oracle) throw std::invalid_argument("relative_norm needs the fp64 oracle");
    return compare_relative_norm(*oracle, cand, spec.norm_tol);
  case comparator_kind::oracle_bound: {
    if (!oracle) throw std::invalid_argument("oracle_bound needs the fp64 oracle");
    const auto tol =
        oracle_bound_tolerance(ref, *oracle, spec.oracle_factor, spec.oracle_floor_ulps);
    auto res = compare_allclose(*oracle, cand, tol.atol, tol.rtol, tolerance_side::reference);
    if (res.pass && any_nonfinite(cand)) {
      res.pass = false;
      res.reason = "nonfinite";
    }
    return res;
  }
  }
  throw std::invalid_argument("unknown comparator");
}

} // namespace kg
