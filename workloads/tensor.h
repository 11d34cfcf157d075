// Host-side tensors: the one currency every library exchanges (generators fill them, backends
// consume and produce them, comparators read them, reports hash their bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kg {

enum class dtype { float32, float16, bfloat16, float64, int32, int64 };

std::string_view dtype_name(dtype t);
std::optional<dtype> parse_dtype(std::string_view name);
std::size_t dtype_size(dtype t);
bool is_floating(dtype t);

// IEEE binary16 and bfloat16 conversions, round to nearest even (what the hardware and LibTorch
// do for a float -> half cast).
std::uint16_t float_to_half_bits(float v);
float half_bits_to_float(std::uint16_t h);
std::uint16_t float_to_bf16_bits(float v);
float bf16_bits_to_float(std::uint16_t b);

// Rounds v to the nearest value representable in t (float64 -> float32 -> half, as a LibTorch
// cast does), returned as a double.
double round_to(dtype t, double v);

struct host_tensor {
  dtype type = dtype::float32;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> bytes;

  host_tensor() = default;
  host_tensor(dtype t, std::vector<std::int64_t> s);

  std::int64_t numel() const;
  double at(std::int64_t i) const;    // element i as a double (exact for every dtype here)
  void set(std::int64_t i, double v); // stores v rounded to the tensor's dtype

  std::vector<double> to_doubles() const;
  std::vector<float> to_floats() const;
  static host_tensor from_doubles(dtype t, std::vector<std::int64_t> s,
                                  std::span<const double> values);
  // Same values in another dtype (each element rounded once).
  host_tensor cast(dtype t) const;
};

// Calls f(read), read(i) returning element i of t as a double, with t's dtype dispatched once
// rather than per element (a loop over every element of a large tensor: judging outputs).
template <class F>
decltype(auto) with_element_reader(const host_tensor& t, F&& f) {
  const std::byte* p = t.bytes.data();
  switch (t.type) {
  case dtype::float64:
    return f([p](std::int64_t i) {
      double v;
      std::memcpy(&v, p + 8 * i, 8);
      return v;
    });
  case dtype::float32:
    return f([p](std::int64_t i) {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      return static_cast<double>(v);
    });
  default:
    return f([&t](std::int64_t i) { return t.at(i); });
  }
}

std::string shape_string(const std::vector<std::int64_t>& shape); // "4x64"

} // namespace kg
