#include "common/auth/credential.h"

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

}  // namespace tae::auth
