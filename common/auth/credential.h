#pragma once

// An agent's credential as it travels and as the agent keeps it (docs/security.md, "Agents"):
// "ID.SECRET", SECRET being 64 lowercase hex digits. taed hands it out (Enrol, or the provider
// that starts the agent) and keeps only a hash of SECRET; the agent presents it on every call as
// "authorization: Bearer ID.SECRET".

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tae::auth {

struct Credential {
  std::string agent_id;
  std::string secret;
  std::string Text() const { return agent_id + "." + secret; }
};

// "ID.SECRET" -> its parts; nullopt for anything else (no dot, an empty id, a secret that is not
// 64 lowercase hex digits). The id is everything before the last dot, so ids may hold dots.
std::optional<Credential> ParseCredential(std::string_view text);

// Equal strings, compared in time that depends only on their lengths (no early exit).
bool SecretEquals(std::string_view a, std::string_view b);

// 32 bytes from the kernel's random source, as 64 lowercase hex digits: a credential's secret, a
// dashboard session. Internal error when /dev/urandom cannot be read.
absl::StatusOr<std::string> NewSecret();

}  // namespace tae::auth
