// SHA-256 (FIPS 180-4), so result files can name tensors and inputs by content hash without
// pulling in a crypto library.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace kg {

// Streaming hasher: feed bytes with update() in any chunking, then call finish() once. After
// finish() the object is spent; construct a new one to hash something else.
class sha256 {
public:
  sha256();
  void update(const void* data, std::size_t n);
  std::array<std::uint8_t, 32> finish();
  std::string finish_hex();

private:
  void compress(const std::uint8_t* block);

  std::array<std::uint32_t, 8> state_;
  std::array<std::uint8_t, 64> buffer_{};
  std::size_t buffered_ = 0;
  std::uint64_t total_bytes_ = 0;
};

// One-shot helpers returning 64 lowercase hex digits.
std::string sha256_hex(std::span<const std::byte> data);
std::string sha256_hex(std::string_view data);

} // namespace kg
