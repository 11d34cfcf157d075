#include "suite/timed_layernorm.h"

#include <cmath>

#include "oracles/device_allclose.h"
#include "oracles/layernorm_oracle.h"

namespace kg {

timed_layernorm::timed_layernorm(const layernorm_config& cfg, affine_formula expected,
                                 int timed_sets)
    : cfg_(cfg), timed_sets_(timed_sets) {
  for (int i = 0; i <= timed_sets; ++i) { // the last one is the fresh set
    layernorm_config c = cfg;
    c.seed = cfg.seed + static_cast<std::uint64_t>(i) + (i == timed_sets ? 1000 : 0);
    const auto in = draw_layernorm_inputs(c);
    set s{device_buffer(in.x.bytes.size()),
          device_buffer(in.weight.bytes.size()),
          device_buffer(in.bias.bytes.size()),
          device_buffer(in.x.bytes.size()),
          {},
          {}};
    KG_CUDA_CHECK(cudaMemcpy(s.x.get(), in.x.bytes.data(), s.x.size(), cudaMemcpyHostToDevice));
    KG_CUDA_CHECK(
        cudaMemcpy(s.w.get(), in.weight.bytes.data(), s.w.size(), cudaMemcpyHostToDevice));
    KG_CUDA_CHECK(cudaMemcpy(s.b.get(), in.bias.bytes.data(), s.b.size(), cudaMemcpyHostToDevice));
    s.oracle = layernorm_oracle_fp64(in, layernorm_eps, expected).to_floats();
    s.oracle_dev = device_buffer(s.oracle.size() * sizeof(float));
    KG_CUDA_CHECK(cudaMemcpy(s.oracle_dev.get(), s.oracle.data(), s.oracle_dev.size(),
                             cudaMemcpyHostToDevice));
    sets_.push_back(std::move(s));
  }
}

layernorm_device_set timed_layernorm::device_set(int i) {
  auto& s = sets_.at(static_cast<std::size_t>(i));
  return {s.x.get(), s.w.get(), s.b.get(), s.y.get(), cfg_.rows, cfg_.cols, cfg_.type};
}

std::string timed_layernorm::check(int i) {
  auto& s = sets_.at(static_cast<std::size_t>(i));
  // The same bounds as the GPU kernel tests: a few units of roundoff of each dtype.
  const float tol = cfg_.type == dtype::float16 ? 8e-3f : 2e-5f;
  const auto r =
      device_allclose(s.y.get(), cfg_.type, static_cast<const float*>(s.oracle_dev.get()),
                      s.oracle.size(), tol, tol, check_stream_.get());
  if (r.mismatches == 0) return "";
  // Only the first mismatching element crosses to the host, for the message.
  host_tensor one(cfg_.type, {1});
  const std::size_t esize = dtype_size(cfg_.type);
  KG_CUDA_CHECK(cudaMemcpy(one.bytes.data(), static_cast<const char*>(s.y.get()) + r.first * esize,
                           esize, cudaMemcpyDeviceToHost));
  return std::to_string(r.mismatches) + " elements differ; element " + std::to_string(r.first) +
         " is " + std::to_string(one.to_floats()[0]) + ", expected " +
         std::to_string(s.oracle[r.first]);
}

honest_work timed_layernorm::work(layernorm_launch launch) {
  honest_work w;
  w.timed_sets = timed_sets_;
  w.launch = [this, launch](int i, cudaStream_t s) { launch(device_set(i), s); };
  w.poison = [this](int i, cudaStream_t s) {
    auto& set = sets_.at(static_cast<std::size_t>(i));
    KG_CUDA_CHECK(cudaMemsetAsync(set.y.get(), 0xff, set.y.size(), s)); // NaN in fp16 and fp32
  };
  w.check = [this](int i) { return check(i); };
  return w;
}

} // namespace kg
