#include "agent/train/metrics_sink.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/clock/clock.h"
#include "nlohmann/json.hpp"

namespace tae::train {
namespace {

constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53

}  // namespace

std::string FormatMetricLine(int64_t step, const MetricValues& values) {
  nlohmann::ordered_json line;
  line["step"] = step;
  for (const auto& [name, value] : values) {
    if (!std::isfinite(value)) {
      // A diverged value goes as a string the agent reads back as it (JSON has no NaN).
      line[name] = std::isnan(value) ? "nan" : value > 0 ? "inf" : "-inf";
      continue;
    }
    if (std::floor(value) == value && std::fabs(value) < kMaxExactInteger) {
      line[name] = static_cast<int64_t>(value);
    } else {
      line[name] = value;
    }
  }
  return line.dump();
}

std::string FormatMetaLine(const std::vector<std::pair<std::string, std::string>>& meta) {
  nlohmann::ordered_json values = nlohmann::ordered_json::object();
  for (const auto& [key, value] : meta) {
    values[key] = value;
  }
  nlohmann::ordered_json line;
  line["meta"] = std::move(values);
  // Replaces invalid UTF-8 (e.g. in a library path) instead of throwing.
  return line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

absl::StatusOr<std::unique_ptr<MetricsSink>> MetricsSink::FromEnvValue(const char* env_value) {
  if (env_value == nullptr) {
    return std::make_unique<MetricsSink>(STDOUT_FILENO);
  }
  int fd = -1;
  if (!absl::SimpleAtoi(env_value, &fd) || fd < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("TAE_METRICS_FD=\"", env_value, "\" is not a file descriptor number"));
  }
  if (::fcntl(fd, F_GETFD) == -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("TAE_METRICS_FD=", fd, " is not an open file descriptor"));
  }
  auto sink = std::make_unique<MetricsSink>(fd);
  sink->agent_ = true;
  return sink;
}

absl::Status MetricsSink::Emit(int64_t step, const MetricValues& values) {
  return WriteLine(FormatMetricLine(step, values) + "\n");
}

absl::Status MetricsSink::EmitMeta(const std::vector<std::pair<std::string, std::string>>& meta) {
  return WriteLine(FormatMetaLine(meta) + "\n");
}

absl::Status MetricsSink::EmitCheckpoint(int64_t step) {
  if (!agent_) {
    return absl::OkStatus();
  }
  return WriteLine(
      absl::StrFormat("{\"checkpoint\":{\"step\":%d,\"time\":%.6f}}\n", step, clock::WallNow()));
}

absl::Status MetricsSink::EmitProfile(const std::string& id, int64_t first_step, int64_t steps,
                                      const std::string& error) {
  if (!agent_) {
    return absl::OkStatus();
  }
  nlohmann::json mark = {{"id", id},
                         {"time", clock::WallNow()},
                         {"step", first_step},
                         {"steps", steps},
                         {"tool", "libtorch"}};
  if (!error.empty()) {
    mark["error"] = error;
  }
  return WriteLine(nlohmann::json{{"profile", mark}}.dump() + "\n");
}

absl::Status MetricsSink::WriteLine(const std::string& line) {
  size_t written = 0;
  while (written < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + written, line.size() - written);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot write metrics to fd ", fd_, ": ", std::strerror(errno)));
    }
    written += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace tae::train
