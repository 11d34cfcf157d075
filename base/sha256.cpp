#include "base/sha256.h"

#include <stdexcept>

#include <openssl/evp.h>

namespace kg {

struct sha256::context {
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  ~context() { EVP_MD_CTX_free(md); }
};

namespace {

std::string to_hex(const std::array<std::uint8_t, 32>& d) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s(64, '0');
  for (std::size_t i = 0; i < d.size(); ++i) {
    s[2 * i] = digits[d[i] >> 4];
    s[2 * i + 1] = digits[d[i] & 15];
  }
  return s;
}

} // namespace

sha256::sha256() : ctx_(std::make_unique<context>()) {
  if (!ctx_->md || EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("libcrypto: cannot start a SHA-256 digest");
}

sha256::~sha256() = default;

void sha256::update(const void* data, std::size_t n) {
  if (n > 0 && EVP_DigestUpdate(ctx_->md, data, n) != 1)
    throw std::runtime_error("libcrypto: SHA-256 update failed");
}

std::array<std::uint8_t, 32> sha256::finish() {
  std::array<std::uint8_t, 32> digest{};
  unsigned len = 0;
  if (EVP_DigestFinal_ex(ctx_->md, digest.data(), &len) != 1 || len != digest.size())
    throw std::runtime_error("libcrypto: SHA-256 final failed");
  return digest;
}

std::string sha256::finish_hex() {
  return to_hex(finish());
}

std::string sha256_hex(std::span<const std::byte> data) {
  sha256 h;
  h.update(data.data(), data.size());
  return h.finish_hex();
}

std::string sha256_hex(std::string_view data) {
  sha256 h;
  h.update(data.data(), data.size());
  return h.finish_hex();
}

} // namespace kg
