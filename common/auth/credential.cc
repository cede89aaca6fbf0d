#include "common/auth/credential.h"

#include <fcntl.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace tae::auth {

std::optional<Credential> ParseCredential(std::string_view text) {
  const size_t dot = text.rfind('.');
  if (dot == std::string_view::npos || dot == 0) {
    return std::nullopt;
  }
  std::string_view secret = text.substr(dot + 1);
  if (secret.size() != 64) {
    return std::nullopt;
  }
  for (char c : secret) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return std::nullopt;
    }
  }
  return Credential{std::string(text.substr(0, dot)), std::string(secret)};
}

bool SecretEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return false;
  }
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

absl::StatusOr<std::string> NewSecret() {
  unsigned char bytes[32];
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  const bool ok = fd >= 0 && read(fd, bytes, sizeof(bytes)) == static_cast<ssize_t>(sizeof(bytes));
  if (fd >= 0) {
    close(fd);
  }
  if (!ok) {
    return absl::InternalError("cannot read /dev/urandom for a secret");
  }
  std::string out;
  for (unsigned char b : bytes) {
    absl::StrAppend(&out, absl::Hex(b, absl::kZeroPad2));
  }
  return out;
}

}  // namespace tae::auth
