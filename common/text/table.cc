#include "common/text/table.h"

#include <algorithm>
#include <cmath>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace tae::text {

std::string Table::Render() const {
  std::vector<size_t> widths(header_.size(), 0);
  auto measure = [&widths](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  };
  measure(header_);
  for (const auto& row : rows_) {
    measure(row);
  }
  auto line = [&widths](const std::vector<std::string>& row) {
    std::string out;
    for (size_t i = 0; i < widths.size(); ++i) {
      std::string cell = i < row.size() ? row[i] : "";
      if (i + 1 < widths.size()) {
        cell.resize(widths[i] + 2, ' ');
      }
      out += cell;
    }
    while (!out.empty() && out.back() == ' ') {
      out.pop_back();
    }
    return out + "\n";
  };
  std::string out = line(header_);
  for (const auto& row : rows_) {
    out += line(row);
  }
  return out;
}

std::string FormatTime(double unix_seconds) {
  if (unix_seconds <= 0) {
    return "-";
  }
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string FormatDuration(double seconds) {
  if (seconds < 0) {
    seconds = 0;
  }
  int64_t s = static_cast<int64_t>(seconds);
  if (s < 60) {
    return absl::StrCat(s, "s");
  }
  if (s < 3600) {
    return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  }
  return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
}

std::string FormatNumber(double value, int digits) {
  if (std::isnan(value)) {
    return "nan";
  }
  double mag = std::fabs(value);
  if (mag != 0 && (mag < 1e-3 || mag >= 1e6)) {
    return absl::StrFormat("%.*e", digits - 2, value);
  }
  return absl::StrFormat("%.*f", digits, value);
}

std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) {
    return text;
  }
  return absl::StrCat("\"", absl::StrReplaceAll(text, {{"\"", "\"\""}}), "\"");
}

}  // namespace tae::text
