// The fingerprint the audit worker checks its kept inputs with (oracles/device_fingerprint.h),
// its host side: a known answer from splitmix64's published first output, and that one changed
// byte anywhere, or two words swapped, changes it. (The device side against this one: gpu test
// gpu_timing.device_fingerprint_matches_the_host.)
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "oracles/device_fingerprint.h"

using namespace kg;

// splitmix64 seeded with 0 first returns 0xe220a8397b1dcdaf: its finalizer applied to the golden
// gamma 0x9e3779b97f4a7c15. A 16-byte word at position 0 contributes mix(lo) + mix(hi ^ 1), so lo
// = the gamma and hi = 1 (mix(0) = 0) gives exactly that output.
TEST(fingerprint, one_word_gives_splitmix64s_first_output) {
  unsigned char w[16];
  const std::uint64_t lo = 0x9e3779b97f4a7c15ull, hi = 1;
  std::memcpy(w, &lo, 8);
  std::memcpy(w + 8, &hi, 8);
  EXPECT_EQ(host_fingerprint(w, 16), 0xe220a8397b1dcdafull);
  // A buffer of zero words: each word i adds mix(i * gamma) + mix(i * c + 1); word 0 adds
  // mix(0) + mix(1) = 0 + mix(1), so the sum is not zero and depends on the length.
  std::vector<unsigned char> zeros(64, 0);
  EXPECT_NE(host_fingerprint(zeros.data(), 16), host_fingerprint(zeros.data(), 32));
}

TEST(fingerprint, any_changed_byte_or_swapped_word_changes_it) {
  std::vector<unsigned char> b(1000 * 16 + 7);
  for (std::size_t i = 0; i < b.size(); ++i)
    b[i] = static_cast<unsigned char>(i * 131 + 3);
  const auto base = host_fingerprint(b.data(), b.size());
  EXPECT_EQ(base, host_fingerprint(b.data(), b.size())); // deterministic
  for (const std::size_t at : {std::size_t{0}, std::size_t{15}, std::size_t{8191}, b.size() - 1}) {
    auto c = b;
    c[at] ^= 0x80;
    EXPECT_NE(host_fingerprint(c.data(), c.size()), base) << "byte " << at;
  }
  auto swapped = b; // words 3 and 700 exchanged: the same multiset of words, other positions
  std::swap_ranges(swapped.begin() + 3 * 16, swapped.begin() + 4 * 16, swapped.begin() + 700 * 16);
  EXPECT_NE(host_fingerprint(swapped.data(), swapped.size()), base);
  // The tail's bytes count, and so does its length (a trailing zero byte is not nothing).
  EXPECT_NE(host_fingerprint(b.data(), b.size() - 1), base);
}
