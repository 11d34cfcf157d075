// Deterministic, platform-independent random streams. Every input kernelgate generates comes from
// here (never from LibTorch or curand), so the CPU and CUDA backends see bit-identical inputs and
// a published seed reproduces the same bytes on any machine.
#pragma once

#include <cstdint>
#include <string_view>

namespace kg {

std::uint64_t splitmix64(std::uint64_t& state);
// FNV-1a of a role name ("x", "weight", ...): gives each tensor of a configuration its own stream.
std::uint64_t stream_id(std::string_view role);

// 64 bits from the operating system's entropy pool (getrandom): a run's secret seed, so that no
// input of the run can be generated before it. Throws std::runtime_error if the pool fails.
std::uint64_t secret_seed();

// xoshiro256** seeded through splitmix64 from (seed, stream).
class rng {
public:
  rng(std::uint64_t seed, std::uint64_t stream);
  std::uint64_t next_u64();
  double uniform01();                   // [0, 1) with 53 random bits
  double normal();                      // N(0, 1), Box-Muller in double precision
  std::uint64_t below(std::uint64_t n); // uniform integer in [0, n), unbiased

private:
  std::uint64_t s_[4];
  double spare_ = 0.0;
  bool has_spare_ = false;
};

} // namespace kg
