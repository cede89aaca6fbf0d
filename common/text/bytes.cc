#include "common/text/bytes.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tae::text {

std::string FormatBytes(uint64_t bytes) {
  if (bytes < 1000) {
    return absl::StrCat(bytes, " B");
  }
  const char* units[] = {"kB", "MB", "GB", "TB"};
  double value = static_cast<double>(bytes);
  int unit = -1;
  while (value >= 1000 && unit < 3) {
    value /= 1000;
    unit += 1;
  }
  return absl::StrFormat("%.1f %s", value, units[unit]);
}

}  // namespace tae::text
