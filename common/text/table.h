#pragma once

// Plain-text tables (taectl, the report's text renderings): left-aligned columns, two spaces apart.

#include <string>
#include <vector>

namespace tae::text {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string Render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// Formatting helpers shared by the commands.
std::string FormatTime(double unix_seconds);             // 2026-11-22 11:35:02
std::string FormatDuration(double seconds);              // 1m05s
std::string FormatNumber(double value, int digits = 4);  // 0.1234, 1.23e-05
std::string CsvField(const std::string& text);  // quoted (" doubled) only when it needs to be

}  // namespace tae::text
