// server/http/routes.h: how the dashboard's route table reads a path.

#include <catch2/catch.hpp>

#include "server/http/routes.h"

namespace tae::http {

TEST_CASE("routes: a pattern's literal parts match themselves, {name} one part, * the rest") {
  using P = PathParams;
  CHECK(MatchPath("/api/runs/{run}/logs", "/api/runs/r12/logs") == P{{"run", "r12"}});
  CHECK(MatchPath("/api/runs/{run}/logs", "/api/runs/r12/logs/") == P{{"run", "r12"}});
  CHECK(MatchPath("/api/experiments", "/api/experiments") == P{});
  CHECK(MatchPath("/api/agents/{agent}/drain", "/api/agents/tpu-1/drain") == P{{"agent", "tpu-1"}});

  // A part more, a part less, another literal: no match.
  CHECK_FALSE(MatchPath("/api/runs/{run}", "/api/runs/r12/logs"));
  CHECK_FALSE(MatchPath("/api/runs/{run}/logs", "/api/runs/r12"));
  CHECK_FALSE(MatchPath("/api/runs/{run}/logs", "/api/runs/r12/logs.txt"));
  CHECK_FALSE(MatchPath("/api/runs/{run}", "/api/runs"));
  CHECK_FALSE(MatchPath("/api/experiments", "/api/experiment"));

  // "*" as the last part: the rest, nothing included.
  CHECK(MatchPath("/api/*", "/api/no/such/thing") == P{{"*", "no/such/thing"}});
  CHECK(MatchPath("/api/*", "/api") == P{{"*", ""}});
  CHECK(MatchPath("/*", "/") == P{{"*", ""}});
  CHECK(MatchPath("/*", "/app.js") == P{{"*", "app.js"}});
  CHECK_FALSE(MatchPath("/api/*", "/app.js"));
}

}  // namespace tae::http
