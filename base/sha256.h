// SHA-256 (FIPS 180-4) through OpenSSL's libcrypto (EVP), so result files can name tensors and
// inputs by content hash. No OpenSSL header leaks out of base/sha256.cpp.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace kg {

// Streaming hasher: feed bytes with update() in any chunking, then call finish() once. After
// finish() the object is spent; construct a new one to hash something else. Throws
// std::runtime_error if libcrypto refuses (no SHA-256 provider).
class sha256 {
public:
  sha256();
  ~sha256();
  sha256(const sha256&) = delete;
  sha256& operator=(const sha256&) = delete;
  void update(const void* data, std::size_t n);
  std::array<std::uint8_t, 32> finish();
  std::string finish_hex();

private:
  struct context; // an EVP_MD_CTX
  std::unique_ptr<context> ctx_;
};

// One-shot helpers returning 64 lowercase hex digits.
std::string sha256_hex(std::span<const std::byte> data);
std::string sha256_hex(std::string_view data);

} // namespace kg
