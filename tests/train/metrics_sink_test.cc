#include "agent/train/metrics_sink.h"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>

#include "nlohmann/json.hpp"

namespace tae::train {
namespace {

std::string ReadAll(int fd) {
  std::string text;
  char buffer[4096];
  ssize_t n = 0;
  while ((n = ::read(fd, buffer, sizeof(buffer))) > 0) {
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

TEST_CASE("metric lines are one JSON object with step first", "[metrics]") {
  const std::string line =
      FormatMetricLine(100, {{"train/loss", 2.31},
                             {"model/params", 103296.0},
                             {"eval/loss", std::numeric_limits<double>::quiet_NaN()},
                             {"train/grad_norm", std::numeric_limits<double>::infinity()}});
  // A diverged value is a string the agent's parser reads back as that value, not left out.
  CHECK(line ==
        R"({"step":100,"train/loss":2.31,"model/params":103296,"eval/loss":"nan",)"
        R"("train/grad_norm":"inf"})");
  CHECK(line.find('\n') == std::string::npos);
}

TEST_CASE("the sink writes whole lines to its fd", "[metrics]") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  MetricsSink sink(fds[1]);
  REQUIRE(sink.Emit(0, {{"model/params", 12.0}}).ok());
  REQUIRE(sink.Emit(10, {{"train/loss", 0.5}}).ok());
  ::close(fds[1]);
  CHECK(ReadAll(fds[0]) == "{\"step\":0,\"model/params\":12}\n{\"step\":10,\"train/loss\":0.5}\n");
  ::close(fds[0]);
  CHECK_FALSE(sink.Emit(20, {{"train/loss", 0.4}}).ok());  // fd closed
}

TEST_CASE("a meta line is one JSON object of strings that the agent's parser accepts",
          "[metrics]") {
  const std::vector<std::pair<std::string, std::string>> meta = {{"libtorch", "1.13.0"},
                                                                 {"blas", "/usr/lib/libblas.so.3"}};
  CHECK(FormatMetaLine(meta) == R"({"meta":{"libtorch":"1.13.0","blas":"/usr/lib/libblas.so.3"}})");
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  MetricsSink sink(fds[1]);
  REQUIRE(sink.EmitMeta(meta).ok());
  ::close(fds[1]);
  CHECK(ReadAll(fds[0]) == FormatMetaLine(meta) + "\n");
  ::close(fds[0]);
  CHECK_FALSE(sink.EmitMeta(meta).ok());  // fd closed
}

TEST_CASE("TAE_METRICS_FD is validated", "[metrics]") {
  absl::StatusOr<std::unique_ptr<MetricsSink>> stdout_sink = MetricsSink::FromEnvValue(nullptr);
  REQUIRE(stdout_sink.ok());
  CHECK((*stdout_sink)->fd() == STDOUT_FILENO);
  CHECK_FALSE(MetricsSink::FromEnvValue("three").ok());
  CHECK_FALSE(MetricsSink::FromEnvValue("-1").ok());
  const int fd = ::open("/dev/null", O_WRONLY);
  REQUIRE(fd >= 0);
  const std::string name = std::to_string(fd);
  absl::StatusOr<std::unique_ptr<MetricsSink>> sink = MetricsSink::FromEnvValue(name.c_str());
  REQUIRE(sink.ok());
  CHECK((*sink)->fd() == fd);
  ::close(fd);
  CHECK_FALSE(MetricsSink::FromEnvValue(name.c_str()).ok());  // closed now
}

}  // namespace
}  // namespace tae::train
