// Runtime int -> template argument, for the GEMV launchers: dispatch_int<1, 2, 4>(v, f) calls
// f(std::integral_constant<int, V>{}) for the V equal to v and returns its result, or
// cudaErrorInvalidValue when v is none of them. Nesting calls picks several arguments at once.
#pragma once

#include <type_traits>

#include <cuda_runtime_api.h>

namespace kg::gemv_detail {

template <int... Vs, class F>
cudaError_t dispatch_int(int v, F&& f) {
  cudaError_t e = cudaErrorInvalidValue;
  // Short-circuits at the match: only that V's call runs (every V's call is instantiated).
  (void)((v == Vs && (e = f(std::integral_constant<int, Vs>{}), true)) || ...);
  return e;
}

} // namespace kg::gemv_detail
