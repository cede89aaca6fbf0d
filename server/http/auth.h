#pragma once

// Who may use the dashboard (docs/dashboard.md, "Security"). Pure: the HTTP server asks, these
// functions decide.
//
// - A random token lives in $TAE_HOME/http.token (0600), readable only by the user who runs taed.
//   `taectl ui` prints the URL with it: /?token=T. That request is answered with an HttpOnly,
//   SameSite=Strict session cookie, a fresh random value per sign-in that taed keeps in memory
//   for kSessionSeconds (so a cookie a browser sends to another local port is worth little: it
//   expires, and every restart of taed forgets it), and a page that moves on to / by itself.
// - Every other request needs the cookie; without it /api answers 401 and pages ask for the URL.
// - Actions (POST) also need the X-CSRF-Token header, a second value derived from the session that
//   pages get from GET /api/session (which needs the cookie). A page of another origin can make the
//   browser send a request but cannot read that value.
// - The Host header must name the loopback address the server listens on (a DNS-rebinding page
//   would send its own host name), and a POST's Origin, when present, must be that same origin.
// - A request the browser marks as sent by another site (Sec-Fetch-Site other than same-origin or
//   none) is refused before the cookie is looked at. Cookies are not scoped by port, so a page
//   served from another 127.0.0.1 port (a notebook, TensorBoard) is "same-site" and would
//   otherwise get the browser to send ours. The sign-in URL is the one exception: it carries the
//   token itself.
// - A program (the `tae` Python library, scripts) sends `Authorization: Bearer T` with the token
//   instead, on /api only (CheckBearer): no cookie, so no CSRF token either. A page of another
//   origin cannot make a browser send that header without a CORS preflight, which taed never
//   grants, and it does not know T. The Host and Sec-Fetch-Site rules hold for it too.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tae::http {

inline constexpr char kSessionCookie[] = "tae_session";

struct Secrets {
  std::string session;  // the cookie's value
  std::string csrf;     // the X-CSRF-Token value
};

// Both derived from the token with SHA-256 under distinct labels: `session` is what a sign-in
// URL's token is checked against (the token itself is never kept in memory as-is).
Secrets DeriveSecrets(std::string_view token);

// A session's secrets: its value and the CSRF token derived from it.
Secrets SessionSecrets(std::string session);

inline constexpr double kSessionSeconds = 7 * 24 * 3600;

// The signed-in sessions, each a random value minted at sign-in, forgotten after
// kSessionSeconds or when more than kMaxSessions are open (the oldest first). Not thread-safe:
// the HTTP server's thread only.
class SessionTable {
 public:
  static constexpr size_t kMaxSessions = 256;
  // A new session, from now on valid until now + kSessionSeconds.
  absl::StatusOr<Secrets> Mint(double now);
  // The secrets of the session whose cookie value is `value`, if it is open at `now`.
  std::optional<Secrets> Find(std::string_view value, double now) const;
  size_t size() const { return expiry_.size(); }

 private:
  std::map<std::string, double, std::less<>> expiry_;  // session -> when it ends
};

// Equal strings, compared in time that depends only on their lengths.
bool SecretEquals(std::string_view a, std::string_view b);

// The value of cookie `name` in a Cookie header ("a=1; tae_session=x"), if present.
std::optional<std::string> CookieValue(std::string_view header, std::string_view name);
// Every value of cookie `name` in the header, in its order. Cookies are not scoped by port: a
// page of another 127.0.0.1 port can set one of the same name beside ours, and the browser sends
// both, so a session is looked for among all of them (at most kMaxSameNameCookies).
inline constexpr size_t kMaxSameNameCookies = 8;
std::vector<std::string> CookieValues(std::string_view header, std::string_view name);

// The Set-Cookie header value that signs a browser in (Max-Age kSessionSeconds).
std::string SessionSetCookie(const Secrets& secrets);

// What a request may do.
enum class Verdict {
  kAllowed,
  kBadHost,    // 421: not addressed to our loopback listener
  kBadOrigin,  // 403: a POST from another origin
  kNoSession,  // 401: no valid session cookie
  kBadCsrf,    // 403: a POST without the right X-CSRF-Token
  kCrossSite,  // 403: the browser says another site (or another port) sent it
  kBadToken,   // 401: an Authorization header that is not "Bearer <this taed's token>"
};

struct RequestFacts {
  std::string_view method;              // "GET", "POST", ...
  std::string_view host;                // the Host header
  std::string_view origin;              // the Origin header ("" when absent)
  std::string_view cookie;              // the Cookie header
  std::string_view csrf;                // the X-CSRF-Token header
  std::string_view fetch_site;          // the Sec-Fetch-Site header ("" when absent: not a browser)
  std::string_view authorization = {};  // the Authorization header ("" when absent)
};

// port: the port the server listens on. Hosts allowed: 127.0.0.1, localhost and [::1] at it.
Verdict Check(const RequestFacts& request, const Secrets& secrets, int port);

// A request that carries an Authorization header (request.authorization not empty): allowed when
// it is "Bearer T" with T this taed's token (`token` = DeriveSecrets(T)), addressed to our host
// and not marked by a browser as sent by another site. Cookies and CSRF are not looked at.
Verdict CheckBearer(const RequestFacts& request, const Secrets& token, int port);

// "Host header 'evil.example:80' is not this server" and the like, for the error body.
std::string Explain(Verdict verdict);

// The HTTP status of a verdict other than kAllowed.
int StatusOf(Verdict verdict);

}  // namespace tae::http
