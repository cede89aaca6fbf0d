#include "server/http/routes.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace tae::http {

std::optional<PathParams> MatchPath(absl::string_view pattern, absl::string_view path) {
  const std::vector<absl::string_view> want = absl::StrSplit(pattern, '/', absl::SkipEmpty());
  const std::vector<absl::string_view> have = absl::StrSplit(path, '/', absl::SkipEmpty());
  PathParams params;
  for (size_t i = 0; i < want.size(); ++i) {
    const absl::string_view part = want[i];
    if (part == "*" && i + 1 == want.size()) {
      params["*"] = absl::StrJoin(have.begin() + std::min(i, have.size()), have.end(), "/");
      return params;
    }
    if (i >= have.size()) {
      return std::nullopt;
    }
    if (part.size() > 2 && part.front() == '{' && part.back() == '}') {
      params[std::string(part.substr(1, part.size() - 2))] = std::string(have[i]);
    } else if (part != have[i]) {
      return std::nullopt;
    }
  }
  if (have.size() != want.size()) {
    return std::nullopt;
  }
  return params;
}

}  // namespace tae::http
