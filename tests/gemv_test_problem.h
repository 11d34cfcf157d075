// The decode GEMV's GPU test problem (tests/test_gpu_gemv*.cpp): random bf16 inputs on a shape,
// their fp64 oracle, the weights in every layout, and one launch's output as raw bits.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gpu/cuda_check.h"
#include "gpu/device_buffer.h"
#include "kernels/decode/gemv_bf16.h"

namespace kg::gemv_test {

inline std::uint16_t to_bf16_bits(float f) { // round to nearest even (inputs are finite)
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

inline double from_bf16_bits(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline std::vector<std::uint16_t> random_bf16(std::size_t count, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<std::uint16_t> v(count);
  for (auto& e : v)
    e = to_bf16_bits(u(rng));
  return v;
}

struct problem {
  int batch, n, k;
  std::vector<std::uint16_t> x, w;
  std::vector<double> oracle; // fp64 sums of the bf16 inputs
  // dw_packed, dw_tiles: the copies in the packed (k % 64 == 0) and wgmma_tiles layouts
  device_buffer dx, dw, dw_packed, dw_tiles, dy;
  // w_seed 0: the weights' seed is 1000 + n; the same seed gives the same leading rows at any n.
  problem(int batch_, int n_, int k_, std::uint32_t w_seed = 0)
      : batch(batch_), n(n_), k(k_), x(random_bf16(std::size_t(batch) * k, 1 + batch)),
        w(random_bf16(std::size_t(n) * k, w_seed ? w_seed : 1000 + n)),
        oracle(std::size_t(batch) * n), dx(x.size() * 2), dw(w.size() * 2),
        dw_packed(gemv_packed_bytes(gemv_layout::packed, n, k)),
        dw_tiles(gemv_packed_bytes(gemv_layout::wgmma_tiles, n, k)),
        dy(std::size_t(batch) * n * 2) {
    for (int b = 0; b < batch; ++b)
      for (int r = 0; r < n; ++r) {
        double s = 0;
        for (int i = 0; i < k; ++i)
          s +=
              from_bf16_bits(x[std::size_t(b) * k + i]) * from_bf16_bits(w[std::size_t(r) * k + i]);
        oracle[std::size_t(b) * n + r] = s;
      }
    KG_CUDA_CHECK(cudaMemcpy(dx.get(), x.data(), x.size() * 2, cudaMemcpyHostToDevice));
    KG_CUDA_CHECK(cudaMemcpy(dw.get(), w.data(), w.size() * 2, cudaMemcpyHostToDevice));
    for (auto [l, buf] : {std::pair{gemv_layout::packed, &dw_packed},
                          std::pair{gemv_layout::wgmma_tiles, &dw_tiles}})
      if (buf->size())
        KG_CUDA_CHECK(pack_gemv_weights(l, static_cast<const __nv_bfloat16*>(dw.get()),
                                        static_cast<__nv_bfloat16*>(buf->get()), n, k, nullptr));
    KG_CUDA_CHECK(cudaDeviceSynchronize());
  }
  // One launch on a poisoned output (all NaN), returned as raw bits.
  std::vector<std::uint16_t> run(const gemv_config& c, void* ws) {
    KG_CUDA_CHECK(cudaMemset(dy.get(), 0xff, dy.size()));
    const gemv_layout l = gemv_weight_layout(c);
    const void* weights = l == gemv_layout::packed        ? dw_packed.get()
                          : l == gemv_layout::wgmma_tiles ? dw_tiles.get()
                                                          : dw.get();
    KG_CUDA_CHECK(launch_gemv_bf16(
        static_cast<const __nv_bfloat16*>(dx.get()), static_cast<const __nv_bfloat16*>(weights),
        static_cast<__nv_bfloat16*>(dy.get()), batch, n, k, c, ws, nullptr));
    KG_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<std::uint16_t> y(std::size_t(batch) * n);
    KG_CUDA_CHECK(cudaMemcpy(y.data(), dy.get(), y.size() * 2, cudaMemcpyDeviceToHost));
    return y;
  }
};

inline __nv_bfloat16* bf16(device_buffer& b) {
  return static_cast<__nv_bfloat16*>(b.get());
}

inline std::string name(const gemv_config& c) {
  return std::string(gemv_kind_name(c.kind)) + ", rows_per_warp " +
         std::to_string(c.rows_per_warp) + ", unroll " + std::to_string(c.unroll) +
         ", warps_per_block " + std::to_string(c.warps_per_block) + ", split_k " +
         std::to_string(c.split_k) + (c.cluster ? ", cluster finish" : "") +
         (c.batch_warps != 1 ? ", batch_warps " + std::to_string(c.batch_warps) : "");
}

} // namespace kg::gemv_test
