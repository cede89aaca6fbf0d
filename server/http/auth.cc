#include "server/http/auth.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/auth/credential.h"
#include "common/snapshot/snapshot.h"

namespace tae::http {
namespace {

absl::string_view Absl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

bool IsOurHost(std::string_view host, int port) {
  const std::string suffix = absl::StrCat(":", port);
  if (host.size() < suffix.size() || host.substr(host.size() - suffix.size()) != suffix) {
    return false;
  }
  host.remove_suffix(suffix.size());
  return host == "127.0.0.1" || host == "localhost" || host == "[::1]";
}

}  // namespace

Secrets DeriveSecrets(std::string_view token) {
  return {snapshot::Sha256Hex(absl::StrCat("tae-dashboard-session\n", Absl(token))),
          snapshot::Sha256Hex(absl::StrCat("tae-dashboard-csrf\n", Absl(token)))};
}

Secrets SessionSecrets(std::string session) {
  std::string csrf = snapshot::Sha256Hex(absl::StrCat("tae-dashboard-csrf\n", session));
  return {std::move(session), std::move(csrf)};
}

absl::StatusOr<Secrets> SessionTable::Mint(double now) {
  absl::StatusOr<std::string> value = auth::NewSecret();
  if (!value.ok()) {
    return value.status();
  }
  for (auto it = expiry_.begin(); it != expiry_.end();) {
    it = it->second <= now ? expiry_.erase(it) : std::next(it);
  }
  while (expiry_.size() >= kMaxSessions) {
    auto oldest = expiry_.begin();
    for (auto it = expiry_.begin(); it != expiry_.end(); ++it) {
      if (it->second < oldest->second) {
        oldest = it;
      }
    }
    expiry_.erase(oldest);
  }
  expiry_[*value] = now + kSessionSeconds;
  return SessionSecrets(*std::move(value));
}

std::optional<Secrets> SessionTable::Find(std::string_view value, double now) const {
  auto it = expiry_.find(value);
  if (it == expiry_.end() || it->second <= now) {
    return std::nullopt;
  }
  return SessionSecrets(it->first);
}

bool SecretEquals(std::string_view a, std::string_view b) { return auth::SecretEquals(a, b); }

std::optional<std::string> CookieValue(std::string_view header, std::string_view name) {
  for (absl::string_view part : absl::StrSplit(Absl(header), ';')) {
    part = absl::StripAsciiWhitespace(part);
    const size_t eq = part.find('=');
    if (eq != absl::string_view::npos && part.substr(0, eq) == Absl(name)) {
      return std::string(part.substr(eq + 1));
    }
  }
  return std::nullopt;
}

std::vector<std::string> CookieValues(std::string_view header, std::string_view name) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(Absl(header), ';')) {
    part = absl::StripAsciiWhitespace(part);
    const size_t eq = part.find('=');
    if (eq != absl::string_view::npos && part.substr(0, eq) == Absl(name)) {
      out.emplace_back(part.substr(eq + 1));
      if (out.size() == kMaxSameNameCookies) {
        break;
      }
    }
  }
  return out;
}

std::string SessionSetCookie(const Secrets& secrets) {
  return absl::StrCat(
      kSessionCookie, "=", secrets.session,
      "; Path=/; HttpOnly; SameSite=Strict; Max-Age=", static_cast<int64_t>(kSessionSeconds));
}

Verdict Check(const RequestFacts& request, const Secrets& secrets, int port) {
  if (!IsOurHost(request.host, port)) {
    return Verdict::kBadHost;
  }
  if (!request.fetch_site.empty() && request.fetch_site != "same-origin" &&
      request.fetch_site != "none") {
    return Verdict::kCrossSite;
  }
  const bool post = request.method != "GET" && request.method != "HEAD";
  if (post && !request.origin.empty()) {
    std::string_view origin = request.origin;
    constexpr std::string_view kScheme = "http://";
    if (origin.substr(0, kScheme.size()) != kScheme ||
        !IsOurHost(origin.substr(kScheme.size()), port)) {
      return Verdict::kBadOrigin;
    }
  }
  // No session to compare with (none signed in, or the cookie names none) is never a match, an
  // empty cookie value included. Any of the cookies of our name may be ours.
  bool signed_in = false;
  for (const std::string& cookie : CookieValues(request.cookie, kSessionCookie)) {
    signed_in = signed_in || (!secrets.session.empty() && SecretEquals(cookie, secrets.session));
  }
  if (!signed_in) {
    return Verdict::kNoSession;
  }
  if (post && !SecretEquals(request.csrf, secrets.csrf)) {
    return Verdict::kBadCsrf;
  }
  return Verdict::kAllowed;
}

Verdict CheckBearer(const RequestFacts& request, const Secrets& token, int port) {
  if (!IsOurHost(request.host, port)) {
    return Verdict::kBadHost;
  }
  if (!request.fetch_site.empty() && request.fetch_site != "same-origin" &&
      request.fetch_site != "none") {
    return Verdict::kCrossSite;
  }
  constexpr std::string_view kBearer = "Bearer ";
  std::string_view header = request.authorization;
  if (header.substr(0, kBearer.size()) != kBearer || token.session.empty()) {
    return Verdict::kBadToken;
  }
  header.remove_prefix(kBearer.size());
  if (header.empty() || !SecretEquals(DeriveSecrets(header).session, token.session)) {
    return Verdict::kBadToken;
  }
  return Verdict::kAllowed;
}

std::string Explain(Verdict verdict) {
  switch (verdict) {
    case Verdict::kAllowed:
      return "";
    case Verdict::kBadHost:
      return "the Host header does not name this server's loopback address";
    case Verdict::kBadOrigin:
      return "a request from another origin is refused";
    case Verdict::kNoSession:
      return "not signed in: open the URL that `taectl ui` prints (it carries the token)";
    case Verdict::kBadCsrf:
      return "X-CSRF-Token: missing or wrong (GET /api/session gives it to the page)";
    case Verdict::kCrossSite:
      return "a request sent by another site or another local port (Sec-Fetch-Site) is refused: "
             "open the dashboard's address directly";
    case Verdict::kBadToken:
      return "Authorization: not \"Bearer <token>\" with this taed's token ($TAE_HOME/http.token)";
  }
  return "refused";
}

int StatusOf(Verdict verdict) {
  switch (verdict) {
    case Verdict::kAllowed:
      return 200;
    case Verdict::kBadHost:
      return 421;
    case Verdict::kBadOrigin:
    case Verdict::kBadCsrf:
    case Verdict::kCrossSite:
      return 403;
    case Verdict::kNoSession:
    case Verdict::kBadToken:
      return 401;
  }
  return 403;
}

}  // namespace tae::http
