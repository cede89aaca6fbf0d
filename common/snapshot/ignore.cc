// Ignore rules: a subset of gitignore (see snapshot.h).

#include <string>
#include <string_view>

#include "common/snapshot/snapshot.h"

namespace tae::snapshot {
namespace {

// Matches a `[...]` class starting at pattern[0] == '[' against c. Sets `length` to the class's
// length in the pattern, or 0 if the class is not closed (then '[' is a literal).
bool MatchClass(std::string_view pattern, char c, size_t& length) {
  size_t i = 1;
  bool negate = false;
  if (i < pattern.size() && (pattern[i] == '!' || pattern[i] == '^')) {
    negate = true;
    ++i;
  }
  bool matched = false;
  bool first = true;
  while (i < pattern.size() && (first || pattern[i] != ']')) {
    first = false;
    char low = pattern[i];
    if (low == '\\' && i + 1 < pattern.size()) {
      low = pattern[++i];
    }
    char high = low;
    if (i + 2 < pattern.size() && pattern[i + 1] == '-' && pattern[i + 2] != ']') {
      high = pattern[i + 2];
      if (high == '\\' && i + 3 < pattern.size()) {
        high = pattern[i + 3];
        ++i;
      }
      i += 2;
    }
    if (static_cast<unsigned char>(low) <= static_cast<unsigned char>(c) &&
        static_cast<unsigned char>(c) <= static_cast<unsigned char>(high)) {
      matched = true;
    }
    ++i;
  }
  if (i >= pattern.size()) {
    length = 0;
    return false;
  }
  length = i + 1;
  return matched != negate;
}

}  // namespace

bool GlobMatch(std::string_view pattern, std::string_view path) {
  while (!pattern.empty()) {
    if (pattern.substr(0, 2) == "**" && (pattern.size() == 2 || pattern[2] == '/')) {
      if (pattern.size() == 2) {
        return true;  // a trailing `**` matches everything that is left
      }
      std::string_view rest = pattern.substr(3);
      // `**/` matches zero or more whole directories.
      if (GlobMatch(rest, path)) {
        return true;
      }
      for (size_t i = 0; i < path.size(); ++i) {
        if (path[i] == '/' && GlobMatch(rest, path.substr(i + 1))) {
          return true;
        }
      }
      return false;
    }
    char p = pattern[0];
    if (p == '*') {
      while (!pattern.empty() && pattern[0] == '*') {
        pattern.remove_prefix(1);  // other runs of '*' act as one
      }
      for (size_t i = 0; i <= path.size(); ++i) {
        if (GlobMatch(pattern, path.substr(i))) {
          return true;
        }
        if (i < path.size() && path[i] == '/') {
          return false;
        }
      }
      return false;
    }
    if (path.empty()) {
      return false;
    }
    if (p == '?') {
      if (path[0] == '/') {
        return false;
      }
      pattern.remove_prefix(1);
    } else if (p == '[') {
      size_t length = 0;
      bool matched = MatchClass(pattern, path[0], length);
      if (length == 0) {
        if (path[0] != '[') {
          return false;
        }
        pattern.remove_prefix(1);
      } else {
        if (!matched || path[0] == '/') {
          return false;
        }
        pattern.remove_prefix(length);
      }
    } else {
      if (p == '\\' && pattern.size() > 1) {
        pattern.remove_prefix(1);
        p = pattern[0];
      }
      if (p != path[0]) {
        return false;
      }
      pattern.remove_prefix(1);
    }
    path.remove_prefix(1);
  }
  return path.empty();
}

void IgnoreMatcher::AddRules(std::string_view base, std::string_view file_text) {
  while (!file_text.empty()) {
    size_t end = file_text.find('\n');
    std::string_view line = file_text.substr(0, end);
    file_text = end == std::string_view::npos ? std::string_view() : file_text.substr(end + 1);
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    // Trailing spaces are dropped unless escaped with a backslash.
    while (!line.empty() && line.back() == ' ' &&
           !(line.size() >= 2 && line[line.size() - 2] == '\\')) {
      line.remove_suffix(1);
    }
    if (line.empty() || line[0] == '#') {
      continue;
    }
    IgnoreRule rule;
    rule.base = std::string(base);
    if (line[0] == '!') {
      rule.negate = true;
      line.remove_prefix(1);
    }
    if (!line.empty() && line.back() == '/') {
      rule.dir_only = true;
      while (!line.empty() && line.back() == '/') {
        line.remove_suffix(1);
      }
    }
    if (!line.empty() && line[0] == '/') {
      rule.anchored = true;
      line.remove_prefix(1);
    }
    if (line.find('/') != std::string_view::npos) {
      rule.anchored = true;
    }
    if (line.empty()) {
      continue;
    }
    rule.pattern = std::string(line);
    rules_.push_back(std::move(rule));
  }
}

bool IgnoreMatcher::Ignored(std::string_view path, bool is_dir) const {
  for (auto it = rules_.rbegin(); it != rules_.rend(); ++it) {
    const IgnoreRule& rule = *it;
    if (rule.dir_only && !is_dir) {
      continue;
    }
    std::string_view below = path;
    if (!rule.base.empty()) {
      if (path.size() <= rule.base.size() || path.substr(0, rule.base.size()) != rule.base ||
          path[rule.base.size()] != '/') {
        continue;
      }
      below.remove_prefix(rule.base.size() + 1);
    }
    if (!rule.anchored) {
      size_t slash = below.rfind('/');
      if (slash != std::string_view::npos) {
        below.remove_prefix(slash + 1);
      }
    }
    if (GlobMatch(rule.pattern, below)) {
      return !rule.negate;
    }
  }
  return false;
}

}  // namespace tae::snapshot
