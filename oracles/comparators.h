// Comparators: each returns a verdict with the error statistics behind it. They model the peers'
// checkers exactly (oracles/protocol.h and docs/architecture.md say how) so kernelgate can audit
// them, plus two of its own that compare against an fp64 oracle.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "workloads/tensor.h"

namespace kg {

struct compare_result {
  bool pass = false;
  std::string reason;         // empty on pass; else shape_mismatch, dtype_mismatch, nonfinite,
                              // all_zero, tolerance, matched_ratio, bitwise, relative_norm
  double max_abs_err = 0.0;   // over finite element pairs
  double max_rel_err = 0.0;   // |d| / max(|ref|, 1e-12)
  double matched_ratio = 0.0; // fraction of elements within the comparator's element rule
  std::int64_t mismatches = 0;
  std::int64_t first_mismatch = -1; // flat index of the first failing element, -1 if none
  std::int64_t numel = 0;
  double relative_norm_err = 0.0; // ||cand - ref||_2 / ||ref||_2 (0/0 -> 0)
  nlohmann::json to_json() const;
};

// Which tensor scales rtol: torch.allclose(ref, cand) -- KernelBench's call -- computes
// |ref - cand| <= atol + rtol * |cand|, the candidate side.
enum class tolerance_side { reference, candidate };

enum class comparator_kind {
  allclose,      // every element |a-b| <= atol + rtol*|side|; NaN fails; equal infinities pass
  matched_ratio, // SOL-ExecBench compute_error_stats: float32, nonfinite and all-zero checks,
                 // >= required_ratio of elements within atol + rtol*|ref|
  both_exceed,   // FlashInfer-Bench: an element fails only if abs > atol AND rel > rtol
  bitwise,       // identical bytes
  relative_norm, // ||cand - ref|| / ||ref|| <= norm_tol, ref being the fp64 oracle
  oracle_bound,  // kernelgate strict: every element within a bound derived from the reference's
                 // own error against the fp64 oracle (see oracle_bound_tolerance)
};
std::string_view comparator_kind_name(comparator_kind k);

struct comparator_spec {
  comparator_kind kind = comparator_kind::allclose;
  double atol = 0.0;
  double rtol = 0.0;
  double required_ratio = 1.0;
  tolerance_side side = tolerance_side::reference;
  double norm_tol = 0.0;
  // oracle_bound: atol = max(factor * max|ref - oracle|, floor_ulps * u(dtype) * max|oracle|),
  // rtol = floor_ulps * u(dtype), with u the dtype's unit roundoff.
  double oracle_factor = 2.0;
  double oracle_floor_ulps = 4.0;
  nlohmann::json to_json() const;
};

// `extra_atol` (optional, shaped like ref): a per-element addition to atol -- the strict
// protocol's condition term for input regimes where float arithmetic is ill-conditioned.
compare_result compare_allclose(const host_tensor& ref, const host_tensor& cand, double atol,
                                double rtol, tolerance_side side,
                                const host_tensor* extra_atol = nullptr);
// compare_allclose's first_mismatch without the rest of its statistics: the index of the first
// element it would count as a mismatch, -1 when none (0 for a shape mismatch). It stops there, so
// a check that needs only pass or fail (the audit's witness plan after a mutant's first
// disagreement) does not scan the whole output.
std::int64_t first_allclose_mismatch(const host_tensor& ref, const host_tensor& cand, double atol,
                                     double rtol, tolerance_side side,
                                     const host_tensor* extra_atol = nullptr);
compare_result compare_matched_ratio(const host_tensor& ref, const host_tensor& cand, double atol,
                                     double rtol, double required_ratio,
                                     bool allow_matching_neg_inf = false);
compare_result compare_both_exceed(const host_tensor& ref, const host_tensor& cand, double atol,
                                   double rtol, double required_ratio);
compare_result compare_bitwise(const host_tensor& ref, const host_tensor& cand);
compare_result compare_relative_norm(const host_tensor& oracle, const host_tensor& cand,
                                     double tol);

double unit_roundoff(dtype t); // 2^-24 float32, 2^-11 float16, 2^-8 bfloat16, 2^-53 float64
struct derived_tolerance {
  double atol, rtol, reference_error;
};
derived_tolerance oracle_bound_tolerance(const host_tensor& ref, const host_tensor& oracle,
                                         double factor, double floor_ulps);

// Dispatch on spec.kind. `ref` is the reference implementation's output; `oracle` the fp64
// oracle (required by relative_norm and oracle_bound, ignored otherwise).
compare_result compare(const comparator_spec& spec, const host_tensor& ref, const host_tensor& cand,
                       const host_tensor* oracle);

} // namespace kg
