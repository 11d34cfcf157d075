#include "base/rng.h"

#include <stdexcept>

#include <sys/random.h>

#include <cmath>
#include <numbers>

namespace kg {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::uint64_t stream_id(std::string_view role) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : role) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

rng::rng(std::uint64_t seed, std::uint64_t stream) {
  std::uint64_t st = seed ^ (stream * 0xd1b54a32d192ed03ull);
  for (auto& s : s_)
    s = splitmix64(st);
}

static inline std::uint64_t rotl(std::uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

std::uint64_t rng::next_u64() {
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double rng::uniform01() {
  return static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
}

double rng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  // 1 - u keeps the log argument in (0, 1].
  const double u1 = 1.0 - uniform01();
  const double u2 = uniform01();
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double a = 2.0 * std::numbers::pi * u2;
  spare_ = r * std::sin(a);
  has_spare_ = true;
  return r * std::cos(a);
}

std::uint64_t rng::below(std::uint64_t n) {
  if (n == 0) return 0;
  const std::uint64_t limit = ~0ull - (~0ull % n);
  std::uint64_t x;
  do
    x = next_u64();
  while (x >= limit);
  return x % n;
}

std::uint64_t secret_seed() {
  std::uint64_t v = 0;
  auto* p = reinterpret_cast<unsigned char*>(&v);
  std::size_t got = 0;
  while (got < sizeof v) {
    const ssize_t n = getrandom(p + got, sizeof v - got, 0);
    if (n < 0) throw std::runtime_error("getrandom failed: cannot draw a secret seed");
    got += static_cast<std::size_t>(n);
  }
  return v;
}

} // namespace kg
