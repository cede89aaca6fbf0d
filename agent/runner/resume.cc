#include "agent/runner/resume.h"

namespace tae::agent {

std::string ResolveResume(std::string_view command, bool resumed) {
  constexpr std::string_view kOpen = "{resume:";
  std::string out;
  size_t at = 0;
  while (true) {
    const size_t open = command.find(kOpen, at);
    const size_t close =
        open == std::string_view::npos ? open : command.find('}', open + kOpen.size());
    if (close == std::string_view::npos) {
      out.append(command.substr(at));
      return out;
    }
    out.append(command.substr(at, open - at));
    if (resumed) {
      out.append(command.substr(open + kOpen.size(), close - open - kOpen.size()));
    }
    at = close + 1;
  }
}

}  // namespace tae::agent
