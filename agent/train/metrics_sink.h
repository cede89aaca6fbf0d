#pragma once

// Metric lines for the agent: one JSON object per line, {"step": 100, "train/loss": 2.31, ...},
// written with one write(2) per line to the fd named by TAE_METRICS_FD, or to stdout when unset.
// A meta line, {"meta": {"libtorch": "1.13.0", ...}}, carries the run's metadata instead.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tae::train {

using MetricValues = std::vector<std::pair<std::string, double>>;

// {"step":N,"k":v,...} without a newline; a non-finite value is the string "nan", "inf" or "-inf"
// (JSON has no NaN), which the agent's parser reads back as that value: the run diverged there.
// Values that are whole numbers below 2^53 are written as integers.
std::string FormatMetricLine(int64_t step, const MetricValues& values);

// {"meta":{"k":"v",...}} without a newline, keys in the given order.
std::string FormatMetaLine(const std::vector<std::pair<std::string, std::string>>& meta);

class MetricsSink {
 public:
  // Writes to `fd`, which the sink does not own.
  explicit MetricsSink(int fd) : fd_(fd) {}

  // The fd named by `env_value` (the value of TAE_METRICS_FD, nullptr when unset: stdout).
  // InvalidArgument when it is not a number or not an open fd.
  static absl::StatusOr<std::unique_ptr<MetricsSink>> FromEnvValue(const char* env_value);

  // Writes one line; an error when the fd is gone.
  absl::Status Emit(int64_t step, const MetricValues& values);
  // Writes one meta line (see FormatMetaLine); an error when the fd is gone.
  absl::Status EmitMeta(const std::vector<std::pair<std::string, std::string>>& meta);

  // Under an agent (TAE_METRICS_FD set): {"checkpoint":{"step":N,"time":T}}, the checkpoint
  // directory holds step N's checkpoint, complete since now; the agent uploads it
  // (docs/checkpoints.md). Without an agent nothing is written.
  absl::Status EmitCheckpoint(int64_t step);
  // Under an agent: {"profile":{"id":..,"time":T,"step":first,"steps":n,"tool":"libtorch"}}, the
  // profile `id` is complete in TAE_PROFILE_DIR, or with "error" why it is not
  // (docs/profiles.md). Without an agent nothing is written.
  absl::Status EmitProfile(const std::string& id, int64_t first_step, int64_t steps,
                           const std::string& error);

  int fd() const { return fd_; }

 private:
  absl::Status WriteLine(const std::string& line);

  int fd_;
  bool agent_ = false;  // the fd came from TAE_METRICS_FD
};

}  // namespace tae::train
