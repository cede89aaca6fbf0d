#include "catch2/catch.hpp"
#include "server/http/auth.h"
#include "server/http/server.h"

namespace tae::http {
namespace {

const Secrets kSecrets = DeriveSecrets("t0ken");

RequestFacts Facts(std::string_view method, std::string_view host, std::string_view cookie,
                   std::string_view csrf = "", std::string_view origin = "") {
  return {method, host, origin, cookie, csrf};
}

TEST_CASE("the secrets derive from the token, differ from it and from each other") {
  CHECK(kSecrets.session == DeriveSecrets("t0ken").session);
  CHECK(kSecrets.session != DeriveSecrets("t0ken2").session);
  CHECK(kSecrets.session != kSecrets.csrf);
  CHECK(kSecrets.session.find("t0ken") == std::string::npos);
  CHECK(SessionSetCookie(kSecrets).find("HttpOnly") != std::string::npos);
  CHECK(SessionSetCookie(kSecrets).find("SameSite=Strict") != std::string::npos);
}

TEST_CASE("cookies are read by name from a Cookie header") {
  CHECK(CookieValue("a=1; tae_session=xyz; b=2", "tae_session") == "xyz");
  CHECK(CookieValue("tae_session_x=1", "tae_session") == std::nullopt);
  CHECK(CookieValue("", "tae_session") == std::nullopt);
}

TEST_CASE("a GET needs the session cookie and our loopback Host") {
  const std::string cookie = std::string(kSessionCookie) + "=" + kSecrets.session;
  CHECK(Check(Facts("GET", "127.0.0.1:8750", cookie), kSecrets, 8750) == Verdict::kAllowed);
  CHECK(Check(Facts("GET", "localhost:8750", cookie), kSecrets, 8750) == Verdict::kAllowed);
  CHECK(Check(Facts("GET", "127.0.0.1:8750", ""), kSecrets, 8750) == Verdict::kNoSession);
  CHECK(Check(Facts("GET", "127.0.0.1:8750", "tae_session=wrong"), kSecrets, 8750) ==
        Verdict::kNoSession);
  // DNS rebinding: the page's own name in Host.
  CHECK(Check(Facts("GET", "evil.example:8750", cookie), kSecrets, 8750) == Verdict::kBadHost);
  CHECK(Check(Facts("GET", "127.0.0.1:9999", cookie), kSecrets, 8750) == Verdict::kBadHost);
  CHECK(StatusOf(Verdict::kNoSession) == 401);
}

TEST_CASE("a POST also needs the CSRF token and, when it says one, our Origin") {
  const std::string cookie = std::string(kSessionCookie) + "=" + kSecrets.session;
  CHECK(Check(Facts("POST", "127.0.0.1:80", cookie, kSecrets.csrf), kSecrets, 80) ==
        Verdict::kAllowed);
  CHECK(Check(Facts("POST", "127.0.0.1:80", cookie, ""), kSecrets, 80) == Verdict::kBadCsrf);
  CHECK(Check(Facts("POST", "127.0.0.1:80", cookie, kSecrets.session), kSecrets, 80) ==
        Verdict::kBadCsrf);
  CHECK(Check(Facts("POST", "127.0.0.1:80", cookie, kSecrets.csrf, "http://evil.example"), kSecrets,
              80) == Verdict::kBadOrigin);
  CHECK(Check(Facts("POST", "127.0.0.1:80", cookie, kSecrets.csrf, "http://127.0.0.1:80"), kSecrets,
              80) == Verdict::kAllowed);
  CHECK(Check(Facts("POST", "127.0.0.1:80", "", kSecrets.csrf), kSecrets, 80) ==
        Verdict::kNoSession);
}

TEST_CASE("query strings are percent-decoded and malformed escapes dropped") {
  auto q = ParseQuery("metric=eval%2Floss&x=step&bad=%zz&sp=a+b");
  CHECK(q["metric"] == "eval/loss");
  CHECK(q["x"] == "step");
  CHECK(q.count("bad") == 0);
  CHECK(q["sp"] == "a b");
  CHECK(PercentDecode("%4", false) == std::nullopt);
  CHECK(PercentDecode("a+b", false) == "a+b");
}

}  // namespace
}  // namespace tae::http
