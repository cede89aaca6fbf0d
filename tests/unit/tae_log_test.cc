// agent/python/tae_log.py, the helper user scripts log metrics with: what it writes is what the
// agent's metric-line parsers (common/metrics) read, on TAE_METRICS_FD and on stdout.
#include <stdio.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "common/metrics/metric_line.h"

namespace tae::metrics {
namespace {

// Runs `code` under /usr/bin/python3 with tae_log importable; returns its stdout lines.
std::vector<std::string> RunPython(const std::string& env, const std::string& code) {
  const std::string command = env + " PYTHONPATH=" TAE_TEST_DATA_DIR "/../../agent/python " +
                              "/usr/bin/python3 -c '" + code + "' 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::vector<std::string> lines;
  char buffer[4096];
  while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) {
    std::string line(buffer);
    if (!line.empty() && line.back() == '\n') {
      line.pop_back();
    }
    lines.push_back(line);
  }
  CHECK(::pclose(pipe) == 0);
  return lines;
}

TEST_CASE("tae_log writes JSON metric lines to TAE_METRICS_FD", "[metrics][tae_log]") {
  std::vector<std::string> lines =
      RunPython("TAE_METRICS_FD=1",
                "import tae_log\n"
                "tae_log.log(step=40, loss=2.31, ok=True, bad=float(\"nan\"))\n"
                "tae_log.log(acc=0.5)\n"
                "tae_log.meta(torch=\"2.1\")\n");
  REQUIRE(lines.size() == 3);
  absl::StatusOr<MetricRecord> first = ParseJsonLine(lines[0]);
  REQUIRE(first.ok());
  CHECK(first->step == 40);
  // NaN goes as "nan", which the parser reads back as NaN: the metric diverged.
  REQUIRE(first->values.size() == 3);
  CHECK(first->values[0] == std::pair<std::string, double>{"loss", 2.31});
  CHECK(first->values[1] == std::pair<std::string, double>{"ok", 1.0});
  CHECK(first->values[2].first == "bad");
  CHECK(std::isnan(first->values[2].second));
  absl::StatusOr<MetricRecord> second = ParseJsonLine(lines[1]);
  REQUIRE(second.ok());
  CHECK_FALSE(second->step.has_value());
  absl::StatusOr<MetricRecord> third = ParseJsonLine(lines[2]);
  REQUIRE(third.ok());
  CHECK(third->meta == std::vector<std::pair<std::string, std::string>>{{"torch", "2.1"}});
}

TEST_CASE("without TAE_METRICS_FD tae_log prints key=value lines the stdout parser reads",
          "[metrics][tae_log]") {
  std::vector<std::string> lines =
      RunPython("env -u TAE_METRICS_FD", "import tae_log\ntae_log.log(step=7, loss=0.25)\n");
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "step=7 loss=0.25");
  std::optional<MetricRecord> record = ParseKeyValueLine(lines[0]);
  REQUIRE(record.has_value());
  CHECK(record->step == 7);
  CHECK(record->values == std::vector<std::pair<std::string, double>>{{"loss", 0.25}});
}

TEST_CASE("tae_log refuses bad keys, steps and values naming them", "[metrics][tae_log]") {
  std::vector<std::string> lines =
      RunPython("TAE_METRICS_FD=1",
                "import tae_log\n"
                "for kw in ({\"step\": -1}, {\"a b\": 1}, {\"loss\": \"x\"}):\n"
                "    try:\n"
                "        tae_log.log(**kw)\n"
                "    except ValueError as e:\n"
                "        print(e)\n");
  CHECK(lines == std::vector<std::string>{
                     "tae_log: step=-1 is not an int >= 0",
                     "tae_log: 'a b' is not a metric key (1-128 printable ASCII characters, no "
                     "spaces or '=')",
                     "tae_log: loss='x' is not a number"});
}

}  // namespace
}  // namespace tae::metrics
