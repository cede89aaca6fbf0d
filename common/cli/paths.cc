#include "common/cli/paths.h"

#include <filesystem>

#include "common/cli/flags.h"

namespace tae::cli {

std::string TaeHome() {
  std::string xdg = EnvOr("XDG_DATA_HOME", "");
  std::string fallback = xdg.empty() ? EnvOr("HOME", ".") + "/.local/share/tae" : xdg + "/tae";
  return EnvOr("TAE_HOME", fallback);
}

std::string ProgramDir() {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "." : self.parent_path().string();
}

}  // namespace tae::cli
