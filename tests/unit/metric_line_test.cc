#include "common/metrics/metric_line.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>

namespace tae::metrics {

TEST_CASE("a diverged value stays a non-finite value in every shape a job writes it") {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // tae-train and tae_log: strings. Python's json.dumps: bare NaN and Infinity (outside strings
  // only: a string that holds the word stays a string, an error).
  for (const char* line : {R"({"step": 30, "loss": "nan", "acc": "-inf", "g": "Infinity"})",
                           R"({"step": 30, "loss": NaN, "acc": -Infinity, "g": Infinity})"}) {
    INFO(line);
    absl::StatusOr<MetricRecord> record = ParseJsonLine(line);
    REQUIRE(record.ok());
    REQUIRE(record->values.size() == 3);
    CHECK(std::isnan(record->values[0].second));
    CHECK(record->values[1].second == -kInf);
    CHECK(record->values[2].second == kInf);
  }
  CHECK_FALSE(ParseJsonLine(R"({"loss": "NaN please"})").ok());
  absl::StatusOr<MetricRecord> quoted = ParseJsonLine(R"({"meta": {"note": "NaN"}, "x": 1})");
  REQUIRE(quoted.ok());
  CHECK(quoted->meta[0].second == "NaN");
  // null is still "not reported".
  CHECK(ParseJsonLine(R"({"loss": null, "x": 1})")->values.size() == 1);
  // key=value on stdout: nan and inf are reports; an overflowing number is not.
  std::optional<MetricRecord> kv = ParseKeyValueLine("step=40 loss=nan gn=inf big=1e999 lr=0.1");
  REQUIRE(kv.has_value());
  REQUIRE(kv->values.size() == 3);
  CHECK(kv->values[0].first == "loss");
  CHECK(std::isnan(kv->values[0].second));
  CHECK(kv->values[1].second == kInf);
  CHECK(kv->values[2].first == "lr");
}

TEST_CASE("a JSON metric line gives its step and values in order") {
  auto record = ParseJsonLine(R"({"step": 100, "train/loss": 2.5, "perf/tokens_per_s": 81234})");
  REQUIRE(record.ok());
  REQUIRE(record->step.has_value());
  CHECK(*record->step == 100);
  REQUIRE(record->values.size() == 2);
  CHECK(record->values[0].first == "train/loss");
  CHECK(record->values[0].second == 2.5);
  CHECK(record->values[1].first == "perf/tokens_per_s");
  CHECK(record->values[1].second == 81234.0);
}

TEST_CASE("a JSON metric line without a step leaves it to the caller, null values are skipped") {
  auto record = ParseJsonLine(R"({"loss": 1.0, "acc": null})");
  REQUIRE(record.ok());
  CHECK_FALSE(record->step.has_value());
  REQUIRE(record->values.size() == 1);
  CHECK(record->values[0].first == "loss");
}

TEST_CASE("bad JSON metric lines are errors that say why") {
  auto message = [](const char* line) {
    auto record = ParseJsonLine(line);
    REQUIRE_FALSE(record.ok());
    return std::string(record.status().message());
  };
  CHECK(message("{not json") == "metric line: not valid JSON");
  CHECK(message("[1, 2]") == "metric line: expected a JSON object");
  CHECK(message(R"({"step": -1, "x": 1})") == "metric line: \"step\" must be >= 0");
  CHECK(message(R"({"step": "ten", "x": 1})") ==
        "metric line: \"step\" must be a non-negative integer");
  CHECK(message(R"({"loss": "low"})") == "metric line: value of 'loss' is not a number");
  CHECK(message(R"({"bad key": 1})") ==
        "metric line: invalid key 'bad key' (1-128 printable characters, no spaces)");
}

TEST_CASE("a JSON line may carry run metadata alone or with metrics") {
  auto alone =
      ParseJsonLine(R"({"meta": {"libtorch": "1.13.0", "threads": 2, "mkl": false, "gpu": null}})");
  REQUIRE(alone.ok());
  CHECK_FALSE(alone->step.has_value());
  CHECK(alone->values.empty());
  using Meta = std::vector<std::pair<std::string, std::string>>;
  CHECK(alone->meta == Meta{{"libtorch", "1.13.0"}, {"threads", "2"}, {"mkl", "false"}});

  auto mixed =
      ParseJsonLine(R"({"step": 3, "meta": {"blas": "/usr/lib/libblas.so.3"}, "loss": 1})");
  REQUIRE(mixed.ok());
  CHECK(mixed->step == 3);
  REQUIRE(mixed->values.size() == 1);
  CHECK(mixed->values[0].first == "loss");
  CHECK(mixed->meta == Meta{{"blas", "/usr/lib/libblas.so.3"}});

  auto empty = ParseJsonLine(R"({"meta": {}})");
  REQUIRE(empty.ok());
  CHECK(empty->meta.empty());
}

TEST_CASE("bad run metadata is an error that names the key") {
  auto message = [](const std::string& line) {
    auto record = ParseJsonLine(line);
    REQUIRE_FALSE(record.ok());
    return std::string(record.status().message());
  };
  CHECK(message(R"({"meta": "1.13"})") == "metric line: \"meta\" must be an object of strings");
  CHECK(message(R"({"meta": {"bad key": "x"}})") ==
        "metric line: invalid meta key 'bad key' (1-128 printable characters, no spaces)");
  CHECK(message(R"({"meta": {"libs": ["a", "b"]}})") ==
        "metric line: meta value of 'libs' is not a string");
  CHECK(message(R"({"meta": {"blas": {"path": "x"}}})") ==
        "metric line: meta value of 'blas' is not a string");
  std::string long_value(kMaxMetaValueLength + 1, 'x');
  CHECK(message(R"({"meta": {"blas": ")" + long_value + R"("}})") ==
        "metric line: meta value of 'blas' is longer than 1024 bytes");
  std::string at_limit(kMaxMetaValueLength, 'x');
  CHECK(ParseJsonLine(R"({"meta": {"blas": ")" + at_limit + R"("}})").ok());
  std::string many = R"({"meta": {)";
  for (size_t i = 0; i <= kMaxMetaEntriesPerLine; ++i) {
    many += (i > 0 ? ",\"k" : "\"k") + std::to_string(i) + "\": \"v\"";
  }
  many += "}}";
  CHECK(message(many) == "metric line: \"meta\" has more than 256 entries");
}

TEST_CASE("key=value lines from TPU training scripts become metrics") {
  auto record = ParseKeyValueLine(
      "Training Device=xla:0/3 Epoch=1 Step=40 Loss=2.31 Rate=812.4 GlobalRate=790.2 "
      "Time=21:19:06");
  REQUIRE(record.has_value());
  CHECK(record->step == 40);
  REQUIRE(record->values.size() == 4);
  CHECK(record->values[0] == std::make_pair(std::string("Epoch"), 1.0));
  CHECK(record->values[1] == std::make_pair(std::string("Loss"), 2.31));
  CHECK(record->values[3].first == "GlobalRate");
  CHECK_FALSE(ParseKeyValueLine("plain progress output, nothing numeric").has_value());
}

TEST_CASE("the value cap counts values only and a huge step is named too large") {
  std::string line = "{";
  for (size_t i = 0; i <= kMaxValuesPerLine; ++i) {
    line += (i ? ",\"k" : "\"k") + std::to_string(i) + "\": 1";
  }
  line += "}";
  absl::StatusOr<MetricRecord> too_many = ParseJsonLine(line);
  REQUIRE_FALSE(too_many.ok());
  CHECK(std::string(too_many.status().message()).find("more than 1024 values") !=
        std::string::npos);
  // Exactly the cap, with a step and meta besides: accepted.
  std::string at_cap = "{\"step\": 3, \"meta\": {\"a\": \"b\"}";
  for (size_t i = 0; i < kMaxValuesPerLine; ++i) {
    at_cap += ",\"k" + std::to_string(i) + "\": 1";
  }
  at_cap += "}";
  absl::StatusOr<MetricRecord> ok = ParseJsonLine(at_cap);
  REQUIRE(ok.ok());
  CHECK(ok->values.size() == kMaxValuesPerLine);
  absl::StatusOr<MetricRecord> huge = ParseJsonLine("{\"step\": 18446744073709551615, \"x\": 1}");
  REQUIRE_FALSE(huge.ok());
  CHECK(std::string(huge.status().message()).find("too large") != std::string::npos);
}

}  // namespace tae::metrics
