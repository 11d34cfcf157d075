// Task fused_scale_bias_tanh: y = tanh(0.75 * x + bias), float32. The accurate tanhf (within
// 2 ulp): the tanh.approx instruction errs by 2^-11 relative, outside the task's tolerance.
// blockIdx.y walks the rows (bias broadcast per column); float4 loads where C % 4 == 0.
#include "kg_candidate.h"

namespace {
constexpr int threads = 256;
constexpr float scale = 0.75f; // the task's params.scale

template <bool vec>
__global__ void scale_bias_tanh_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                       float* __restrict__ y, int64_t R, int64_t C) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * threads * (vec ? 4 : 1);
  for (int64_t r = blockIdx.y; r < R; r += gridDim.y) {
    const int64_t base = r * C;
    for (int64_t c = (static_cast<int64_t>(blockIdx.x) * threads + threadIdx.x) * (vec ? 4 : 1);
         c < C; c += step) {
      if constexpr (vec) {
        const float4 xv = *reinterpret_cast<const float4*>(x + base + c);
        const float4 bv = *reinterpret_cast<const float4*>(bias + c);
        *reinterpret_cast<float4*>(y + base + c) =
            make_float4(tanhf(fmaf(scale, xv.x, bv.x)), tanhf(fmaf(scale, xv.y, bv.y)),
                        tanhf(fmaf(scale, xv.z, bv.z)), tanhf(fmaf(scale, xv.w, bv.w)));
      } else {
        y[base + c] = tanhf(fmaf(scale, x[base + c], bias[c]));
      }
    }
  }
}

bool is_f32(const kg_tensor& t, int ndim) {
  return t.dtype == KG_FLOAT32 && t.ndim == ndim;
}
} // namespace

extern "C" int kg_run(const kg_tensor* in, int n_in, kg_tensor* out, int n_out, cudaStream_t s) {
  if (n_in != 2 || n_out != 1 || !is_f32(in[0], 2) || !is_f32(in[1], 1) || !is_f32(out[0], 2))
    return 1;
  const int64_t R = in[0].shape[0], C = in[0].shape[1];
  if (R < 1 || C < 1 || in[1].shape[0] != C || out[0].shape[0] != R || out[0].shape[1] != C)
    return 1;
  const bool vec = C % 4 == 0;
  const int64_t per_block = threads * (vec ? 4 : 1);
  const dim3 grid(static_cast<unsigned>((C + per_block - 1) / per_block),
                  static_cast<unsigned>(R < 65535 ? R : 65535));
  const auto* x = static_cast<const float*>(in[0].data);
  const auto* b = static_cast<const float*>(in[1].data);
  auto* y = static_cast<float*>(out[0].data);
  if (vec)
    scale_bias_tanh_kernel<true><<<grid, threads, 0, s>>>(x, b, y, R, C);
  else
    scale_bias_tanh_kernel<false><<<grid, threads, 0, s>>>(x, b, y, R, C);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
