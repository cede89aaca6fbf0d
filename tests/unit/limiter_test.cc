// What one peer can make a daemon write (common/log/limiter.h).
#include "common/log/limiter.h"

#include <catch2/catch.hpp>
#include <string>

namespace tae::log {
namespace {

TEST_CASE("a peer gets a line an interval, and the next line says how many were dropped", "[log]") {
  LineLimiter limiter(60.0, 16);
  CHECK(limiter.Admit("ipv4:10.0.0.7", 100.0) == 0);
  int admitted = 0;
  for (int i = 0; i < 100000; ++i) {
    admitted += limiter.Admit("ipv4:10.0.0.7", 100.0 + i * 0.0005).has_value() ? 1 : 0;
  }
  CHECK(admitted == 0);                               // 100,000 calls in 50 s: none written
  CHECK(limiter.Admit("ipv4:10.0.0.8", 120.0) == 0);  // another peer is not held back
  CHECK(limiter.Admit("ipv4:10.0.0.7", 160.0) == 100000);
  CHECK(limiter.Admit("ipv4:10.0.0.7", 161.0) == std::nullopt);
}

TEST_CASE("past its keys, peers share one: lines stay bounded however many peers there are",
          "[log]") {
  LineLimiter limiter(60.0, 4);
  int written = 0;
  for (int peer = 0; peer < 10000; ++peer) {
    written += limiter.Admit("ipv4:10.0." + std::to_string(peer) + ".1", 5.0).has_value() ? 1 : 0;
  }
  CHECK(written == 5);  // four peers, then one line for all the others
  // Once their interval is over and nothing is held, old keys make room for new ones.
  CHECK(limiter.Admit("ipv4:192.168.0.1", 70.0) == 0);
}

TEST_CASE("a peer's key leaves out its port", "[log]") {
  CHECK(LineLimiter::PeerKey("ipv4:10.0.0.7:51234") == "ipv4:10.0.0.7");
  CHECK(LineLimiter::PeerKey("ipv6:[::1]:4433") == "ipv6:[::1]");
  CHECK(LineLimiter::PeerKey("unix:/tmp/x.sock") == "unix:/tmp/x.sock");
}

}  // namespace
}  // namespace tae::log
