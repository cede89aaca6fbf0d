#pragma once

// Parsing of the metric lines a job emits (docs/design.md §2 step 5): JSON objects on the fd named
// by TAE_METRICS_FD, and plain `Key=Value` stdout lines such as `Epoch=1 Step=20 Loss=2.31
// Rate=812`. A JSON line may also carry a "meta" object of strings about the run itself (library
// versions, thread counts), which taed keeps as the run's metadata.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace tae::metrics {

inline constexpr size_t kMaxKeyLength = 128;
inline constexpr size_t kMaxValuesPerLine = 1024;
inline constexpr size_t kMaxMetaEntriesPerLine = 256;
inline constexpr size_t kMaxMetaValueLength = 1024;

// The job marked its checkpoint directory complete for `step` (docs/checkpoints.md).
struct CheckpointMark {
  int64_t step = 0;
  double time = 0;  // when it was marked, seconds since the epoch (the job's clock)
  // Found by the agent (job.checkpoints = "watch"), not marked by the job: the files may be
  // rewritten in place, so the capture copies them and checks each unchanged across its copy.
  bool watched = false;
};

// The job answered a profile request, or captured one on its own (docs/profiles.md): the profile's
// files are complete in TAE_PROFILE_DIR, or `error` says why there are none.
struct ProfileMark {
  std::string id;  // the request's id ("p3f9a2c"), or the job's own ("step120")
  double time = 0;
  std::optional<int64_t> step;  // the first profiled step, when the job knows it
  int64_t steps = 0;
  std::string tool;   // "libtorch", "torch.profiler", "jax.profiler", ...
  std::string error;  // set: no profile
};

struct MetricRecord {
  std::optional<int64_t> step;  // absent: the caller uses the run's last step
  std::vector<std::pair<std::string, double>> values;     // in line order
  std::vector<std::pair<std::string, std::string>> meta;  // in line order
  std::optional<CheckpointMark> checkpoint;
  std::optional<ProfileMark> profile;
};

// Parses one JSON metric line: an object with an optional integer "step" and numeric values,
// e.g. {"step": 10, "train/loss": 2.31}. A diverged value is written as the string "nan", "inf"
// or "-inf" (any case; "+inf", "infinity" too), or as the bare NaN, Infinity and -Infinity that
// Python's json.dumps writes; it is kept as that non-finite double, which says "diverged here",
// unlike null, which is skipped ("not reported").
// An optional "meta" object holds run metadata, e.g. {"meta": {"libtorch": "1.13.0"}}: its keys
// follow the metric key rules, its values are strings (a number or bool becomes its JSON text, a
// null is skipped) of at most kMaxMetaValueLength bytes. A "checkpoint" object,
// {"checkpoint": {"step": 40, "time": 1732000000.5}}, marks the job's checkpoint directory
// complete for that step (tae_log.checkpoint). A "profile" object answers a profile request
// (ProfileMark). Errors name the offending key.
absl::StatusOr<MetricRecord> ParseJsonLine(std::string_view line);

// Parses a `Key=Value Key=Value` line; numeric values become metrics (nan, inf and -inf too: a
// diverged value), `Step`/`step` the step. Returns nullopt when the line holds no numeric
// key=value pair.
std::optional<MetricRecord> ParseKeyValueLine(std::string_view line);

// The non-finite value a word names ("nan", "inf", "-inf", "+inf", "infinity", "-infinity", any
// case), or nullopt.
std::optional<double> NonFiniteWord(std::string_view word);

// A metric key is 1..kMaxKeyLength printable non-space ASCII characters.
bool IsValidMetricKey(std::string_view key);

}  // namespace tae::metrics
