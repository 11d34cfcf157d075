#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/sha256.h"

using namespace kg;

// Expected digests are the published FIPS 180-2 / NIST CSRC example values.
TEST(sha256, empty_input) {
  EXPECT_EQ(sha256_hex(std::string_view{}),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex(std::span<const std::byte>{}),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(sha256, abc) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(sha256, two_block_message) {
  // 56 bytes: the length field no longer fits in the first block, so padding spills into a second.
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(sha256, one_million_a_in_uneven_chunks) {
  const std::string a(1'000'000, 'a');
  sha256 h;
  // Chunk sizes that straddle block boundaries in different ways, including empty updates.
  const std::size_t sizes[] = {1, 0, 63, 64, 65, 127, 3, 1000, 4093};
  std::size_t pos = 0;
  for (std::size_t i = 0; pos < a.size(); ++i) {
    const std::size_t n = std::min(sizes[i % std::size(sizes)], a.size() - pos);
    h.update(a.data() + pos, n);
    pos += n;
  }
  EXPECT_EQ(h.finish_hex(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(sha256, finish_returns_raw_digest) {
  sha256 h;
  h.update("abc", 3);
  const auto d = h.finish();
  EXPECT_EQ(d[0], 0xba);
  EXPECT_EQ(d[1], 0x78);
  EXPECT_EQ(d[31], 0xad);
}

TEST(sha256, chunked_matches_one_shot_on_random_data) {
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<std::size_t> chunk(0, 200);
  // Lengths around the padding edge cases (55, 56, 63, 64) plus a few larger ones.
  for (std::size_t len : {0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 1000, 10007}) {
    std::vector<std::byte> data(len);
    for (auto& b : data)
      b = static_cast<std::byte>(byte(rng));
    const std::string expected = sha256_hex(data);
    sha256 h;
    std::size_t pos = 0;
    while (pos < len) {
      const std::size_t n = std::min(chunk(rng), len - pos);
      h.update(data.data() + pos, n);
      pos += n;
    }
    EXPECT_EQ(h.finish_hex(), expected) << "length " << len;
  }
}

// 1 MiB of 0x5a, the digest by coreutils' sha256sum (an implementation independent of libcrypto's
// EVP path); its speed is measured in bench/bench_audit.cpp, not here.
TEST(sha256, one_mebibyte_matches_coreutils) {
  const std::vector<std::byte> data(1 << 20, std::byte{0x5a});
  EXPECT_EQ(sha256_hex(data), "bf63d8a95fcc2e64619813aae35fdcbe871fdd9264caa3f365eb3aed0f679129");
}
