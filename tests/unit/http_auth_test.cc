#include "catch2/catch.hpp"
#include "server/http/auth.h"
#include "server/http/server.h"

namespace tae::http {
namespace {

const Secrets kSecrets = DeriveSecrets("t0ken");

RequestFacts Facts(std::string_view method, std::string_view host, std::string_view cookie,
                   std::string_view csrf = "", std::string_view origin = "",
                   std::string_view fetch_site = "") {
  return {method, host, origin, cookie, csrf, fetch_site};
}

TEST_CASE("each sign-in is its own random session, forgotten when it expires or crowds out") {
  SessionTable sessions;
  auto a = sessions.Mint(100);
  auto b = sessions.Mint(100);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->session != b->session);  // never the same value twice, nothing derived from a token
  CHECK(a->session.size() == 64);
  CHECK(a->csrf == SessionSecrets(a->session).csrf);
  CHECK(a->csrf != a->session);
  REQUIRE(sessions.Find(a->session, 101).has_value());
  CHECK(sessions.Find(a->session, 101)->csrf == a->csrf);
  CHECK_FALSE(sessions.Find("guess", 101).has_value());
  CHECK_FALSE(sessions.Find(a->session, 100 + kSessionSeconds).has_value());  // expired
  for (size_t i = 0; i < SessionTable::kMaxSessions; ++i) {
    REQUIRE(sessions.Mint(200 + static_cast<double>(i)).ok());
  }
  CHECK(sessions.size() == SessionTable::kMaxSessions);
  CHECK_FALSE(sessions.Find(a->session, 300).has_value());  // the oldest went first
  CHECK(SessionSetCookie(*b).find("Max-Age=604800") != std::string::npos);
}

TEST_CASE("no session is never a match, not even for an empty cookie value") {
  // Found by fuzz/fuzz_http.cc: "Cookie: tae_session=;..." against no session.
  for (const char* cookie : {"tae_session=", "tae_session=;x", "tae_session", ""}) {
    INFO(cookie);
    CHECK(Check(Facts("GET", "127.0.0.1:8750", cookie), Secrets{}, 8750) == Verdict::kNoSession);
  }
}

TEST_CASE("a request the browser marks as sent by another site or port is refused") {
  const std::string cookie = std::string(kSessionCookie) + "=" + kSecrets.session;
  for (const char* site : {"same-site", "cross-site", "something-new"}) {
    INFO(site);
    CHECK(Check(Facts("GET", "127.0.0.1:8750", cookie, "", "", site), kSecrets, 8750) ==
          Verdict::kCrossSite);
  }
  CHECK(Check(Facts("GET", "127.0.0.1:8750", cookie, "", "", "same-origin"), kSecrets, 8750) ==
        Verdict::kAllowed);
  CHECK(Check(Facts("GET", "127.0.0.1:8750", cookie, "", "", "none"), kSecrets, 8750) ==
        Verdict::kAllowed);
  CHECK(StatusOf(Verdict::kCrossSite) == 403);
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
  CHECK(CookieValues("tae_session=other; a=1; tae_session=xyz", "tae_session") ==
        std::vector<std::string>{"other", "xyz"});
  CHECK(CookieValues("a=1", "tae_session").empty());
  std::string many;
  for (int i = 0; i < 20; ++i) {
    many += "tae_session=" + std::to_string(i) + "; ";
  }
  CHECK(CookieValues(many, "tae_session").size() == kMaxSameNameCookies);
}

// Another 127.0.0.1 port's page can set a cookie of our name (cookies are not scoped by port);
// the browser then sends both, in an order it chooses: ours still signs the request in.
TEST_CASE("a cookie of our name set by another local port does not sign the dashboard out") {
  const std::string ours = std::string(kSessionCookie) + "=" + kSecrets.session;
  const std::string theirs = std::string(kSessionCookie) + "=set-by-another-port";
  for (const std::string& header : {theirs + "; " + ours, ours + "; " + theirs}) {
    INFO(header);
    CHECK(Check(Facts("GET", "127.0.0.1:8750", header), kSecrets, 8750) == Verdict::kAllowed);
  }
  CHECK(Check(Facts("GET", "127.0.0.1:8750", theirs), kSecrets, 8750) == Verdict::kNoSession);
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
