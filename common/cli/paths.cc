#include "common/cli/paths.h"

#include <unistd.h>

#include <filesystem>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/cli/flags.h"

namespace tae::cli {

std::string AbsolutePath(const std::string& path) {
  if (path.empty()) {
    return path;
  }
  std::string joined = path;
  if (path[0] != '/') {
    std::error_code ec;
    const std::filesystem::path cwd = std::filesystem::current_path(ec);
    // No current directory (removed under us): the path is left as given, and fails where used.
    joined = ec ? path : cwd.string() + "/" + path;
  }
  std::vector<absl::string_view> parts;
  for (absl::string_view part : absl::StrSplit(joined, '/', absl::SkipEmpty())) {
    if (part != ".") {
      parts.push_back(part);
    }
  }
  return joined[0] == '/' ? "/" + absl::StrJoin(parts, "/") : absl::StrJoin(parts, "/");
}

std::string TaeHome() {
  std::string xdg = EnvOr("XDG_DATA_HOME", "");
  std::string fallback = xdg.empty() ? EnvOr("HOME", ".") + "/.local/share/tae" : xdg + "/tae";
  return AbsolutePath(EnvOr("TAE_HOME", fallback));
}

std::string ProgramDir() {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? AbsolutePath(".") : self.parent_path().string();
}

}  // namespace tae::cli
