// common/metrics/patterns: [job.metrics] patterns over a command job's output lines.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "common/metrics/patterns.h"

namespace tae::metrics {
namespace {

using Values = std::vector<std::pair<std::string, double>>;

TEST_CASE("patterns: named groups are metrics, the step group the step, names rename them") {
  absl::StatusOr<LinePatterns> patterns =
      LinePatterns::Create({R"(iter (?P<step>\d+): train loss (?P<train_loss>[-+.\deE]+))",
                            R"(lr (?P<lr>\S+)(?: mfu (?P<mfu>\S+)%)?)"},
                           {{"train_loss", "train/loss"}});
  REQUIRE(patterns.ok());
  std::optional<MetricRecord> got = patterns->Match("iter_dt 21ms; iter 190: train loss 2.53215");
  REQUIRE(got.has_value());
  CHECK(got->step == 190);
  CHECK(got->values == Values{{"train/loss", 2.53215}});
  // Both patterns on one line, in pattern order; a group outside the match gives nothing.
  got = patterns->Match("iter 5: train loss 1e-3 lr 6e-4");
  REQUIRE(got.has_value());
  CHECK(got->values == Values{{"train/loss", 1e-3}, {"lr", 6e-4}});
  // No step group matched: no step (the caller uses the run's last step).
  got = patterns->Match("lr 0.1 mfu 38.5%");
  REQUIRE(got.has_value());
  CHECK_FALSE(got->step.has_value());
  CHECK(got->values == Values{{"lr", 0.1}, {"mfu", 38.5}});
  // Divergence words are values; other text is not.
  got = patterns->Match("lr NaN");
  REQUIRE(got.has_value());
  CHECK(std::isnan(got->values.at(0).second));
  CHECK_FALSE(patterns->Match("lr fast").has_value());
  CHECK_FALSE(patterns->Match("nothing here").has_value());
  CHECK(patterns->Unmatched().empty());
}

TEST_CASE("patterns: what is never matched is told, and kept across a restart of the reader") {
  absl::StatusOr<LinePatterns> patterns =
      LinePatterns::Create({R"(a=(?P<a>\d+))", R"(b=(?P<b>\d+))"}, {});
  REQUIRE(patterns.ok());
  CHECK(patterns->Unmatched().size() == 2);
  REQUIRE(patterns->Match("a=1").has_value());
  CHECK(patterns->Unmatched() == std::vector<std::string>{R"(b=(?P<b>\d+))"});
  CHECK(patterns->MatchedFlags() == "10");
  absl::StatusOr<LinePatterns> again =
      LinePatterns::Create({R"(a=(?P<a>\d+))", R"(b=(?P<b>\d+))"}, {});
  REQUIRE(again.ok());
  again->SetMatched(patterns->MatchedFlags());
  CHECK(again->Unmatched() == std::vector<std::string>{R"(b=(?P<b>\d+))"});
}

TEST_CASE("patterns: a pattern RE2 refuses, or one naming no metric, is an error that says so") {
  CHECK(CheckPattern(R"(iter (?P<step>\d+)").message().find("missing )") != std::string::npos);
  CHECK(CheckPattern(R"(iter (?P<step>\d+))").message().find("names no metric") !=
        std::string::npos);
  CHECK(CheckPattern(R"(loss (\d+))").message().find("names no metric") != std::string::npos);
  CHECK(CheckPattern(R"(loss (?P<loss>\d+))").ok());
  absl::StatusOr<LinePatterns> bad =
      LinePatterns::Create({R"(x (?P<x>\d+))", R"(y (?P<y>\d+)"}, {});
  CHECK(bad.status().message().find("job.metrics.pattern[1]") != std::string::npos);
  absl::StatusOr<LinePatterns> badname =
      LinePatterns::Create({R"(x (?P<x>\d+))"}, {{"x", "has space"}});
  CHECK(badname.status().message().find("'has space'") != std::string::npos);
}

}  // namespace
}  // namespace tae::metrics
