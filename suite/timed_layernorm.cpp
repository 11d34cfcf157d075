#include "suite/timed_layernorm.h"

#include <cmath>

#include "oracles/device_allclose.h"
#include "oracles/device_check.h"
#include "oracles/device_equal.h"
#include "oracles/layernorm_oracle.h"

namespace kg {

timed_layernorm::timed_layernorm(const layernorm_config& cfg, affine_formula expected,
                                 int data_sets)
    : cfg_(cfg) {
  for (int i = 0; i <= data_sets; ++i) { // the last one is the fresh set
    layernorm_config c = cfg;
    c.seed = cfg.seed + static_cast<std::uint64_t>(i) + (i == data_sets ? 1000 : 0);
    const auto in = draw_layernorm_inputs(c);
    data d{device_buffer(in.x.bytes.size()),
           device_buffer(in.weight.bytes.size()),
           device_buffer(in.bias.bytes.size()),
           device_buffer(in.x.bytes.size()),
           {},
           {}};
    KG_CUDA_CHECK(cudaMemcpy(d.x.get(), in.x.bytes.data(), d.x.size(), cudaMemcpyHostToDevice));
    KG_CUDA_CHECK(
        cudaMemcpy(d.w.get(), in.weight.bytes.data(), d.w.size(), cudaMemcpyHostToDevice));
    KG_CUDA_CHECK(cudaMemcpy(d.b.get(), in.bias.bytes.data(), d.b.size(), cudaMemcpyHostToDevice));
    d.oracle = layernorm_oracle_fp64(in, layernorm_eps, expected).to_floats();
    d.oracle_dev = device_buffer(d.oracle.size() * sizeof(float));
    KG_CUDA_CHECK(cudaMemcpy(d.oracle_dev.get(), d.oracle.data(), d.oracle_dev.size(),
                             cudaMemcpyHostToDevice));
    data_.push_back(std::move(d));
  }
  for (int k = 0; k < 3; ++k)
    slots_.push_back({device_buffer(data_[0].x.size()), device_buffer(data_[0].w.size()),
                      device_buffer(data_[0].b.size()), device_buffer(data_[0].x.size())});
}

layernorm_device_set timed_layernorm::device_set(int slot) {
  auto& s = slots_.at(static_cast<std::size_t>(slot));
  return {s.x.get(), s.w.get(), s.b.get(), s.y.get(), cfg_.rows, cfg_.cols, cfg_.type};
}

layernorm_device_set timed_layernorm::staged(int slot, int data, cudaStream_t s) {
  stage(slot, data, 0xff, s);
  KG_CUDA_CHECK(cudaStreamSynchronize(s));
  return device_set(slot);
}

void timed_layernorm::stage(int slot, int d, unsigned char fill, cudaStream_t s) {
  auto& b = slots_.at(static_cast<std::size_t>(slot));
  const auto& in = data_.at(static_cast<std::size_t>(d));
  KG_CUDA_CHECK(cudaMemcpyAsync(b.x.get(), in.x.get(), b.x.size(), cudaMemcpyDeviceToDevice, s));
  KG_CUDA_CHECK(cudaMemcpyAsync(b.w.get(), in.w.get(), b.w.size(), cudaMemcpyDeviceToDevice, s));
  KG_CUDA_CHECK(cudaMemcpyAsync(b.b.get(), in.b.get(), b.b.size(), cudaMemcpyDeviceToDevice, s));
  KG_CUDA_CHECK(cudaMemsetAsync(b.y.get(), fill, b.y.size(), s));
}

std::string timed_layernorm::against_oracle(int slot, int d, cudaStream_t s) {
  const auto& set = data_.at(static_cast<std::size_t>(d));
  auto& b = slots_.at(static_cast<std::size_t>(slot));
  // The same bounds as the GPU kernel tests: a few units of roundoff of each dtype.
  const float tol = cfg_.type == dtype::float16 ? 8e-3f : 2e-5f;
  const auto r =
      device_allclose(b.y.get(), cfg_.type, static_cast<const float*>(set.oracle_dev.get()),
                      set.oracle.size(), tol, tol, s);
  if (r.mismatches == 0) return "";
  // Only the first mismatching element crosses to the host, for the message.
  host_tensor one(cfg_.type, {1});
  const std::size_t esize = dtype_size(cfg_.type);
  KG_CUDA_CHECK(cudaMemcpy(one.bytes.data(), static_cast<const char*>(b.y.get()) + r.first * esize,
                           esize, cudaMemcpyDeviceToHost));
  return "input set " + std::to_string(d) + ": " + std::to_string(r.mismatches) +
         " elements differ; element " + std::to_string(r.first) + " is " +
         std::to_string(one.to_floats()[0]) + ", expected " + std::to_string(set.oracle[r.first]);
}

honest_work timed_layernorm::work(layernorm_launch launch) {
  honest_work w;
  const int timed = static_cast<int>(data_.size()) - 1;
  w.slots = 2;
  w.data_sets = timed;
  w.launch = [this, launch](int slot, cudaStream_t s) { launch(device_set(slot), s); };
  w.stage = [this](int slot, int d, unsigned char fill, cudaStream_t s) {
    stage(slot, d, fill, s);
  };
  // Each set twice: checked against the oracle, then its bits repeated in the other buffers.
  w.verify = [this, launch](cudaStream_t s) -> honest_verdict {
    for (int d = 0; d < static_cast<int>(data_.size()) - 1; ++d) {
      stage(0, d, 0xff, s);
      launch(device_set(0), s);
      if (auto why = against_oracle(0, d, s); !why.empty()) return {"INCORRECT", why};
      auto& set = data_[static_cast<std::size_t>(d)];
      KG_CUDA_CHECK(cudaMemcpyAsync(set.verified.get(), slots_[0].y.get(), set.verified.size(),
                                    cudaMemcpyDeviceToDevice, s));
      stage(1, d, 0x3c, s);
      launch(device_set(1), s);
      KG_CUDA_CHECK(cudaStreamSynchronize(s));
      if (!device_equal(slots_[1].y.get(), set.verified.get(), set.verified.size(), s))
        if (auto why = against_oracle(1, d, s); !why.empty())
          return {"REWARD_HACK",
                  "right on one call, wrong on the next with the same inputs: " + why};
    }
    *flag_.host() = 0;
    return {};
  };
  w.check = [this](int slot, int d, cudaStream_t s) {
    const auto& b = slots_.at(static_cast<std::size_t>(slot));
    const auto& set = data_.at(static_cast<std::size_t>(d));
    launch_output_check(b.y.get(), set.verified.get(), set.oracle.size(), cfg_.type, true, 0, 0,
                        flag_.device(), static_cast<unsigned>(d + 1), s);
  };
  w.failed = [this]() -> std::string {
    const unsigned code = *static_cast<volatile unsigned*>(flag_.host());
    return code ? "output differs from the verified output of input set " + std::to_string(code - 1)
                : "";
  };
  w.fresh = [this, launch](cudaStream_t s) {
    const int fresh = static_cast<int>(data_.size()) - 1;
    stage(2, fresh, 0xff, s);
    launch(device_set(2), s);
    return against_oracle(2, fresh, s);
  };
  return w;
}

} // namespace kg
