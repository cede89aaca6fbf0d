// The canonical manifest text, its parser, and the path checks both sides rely on.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/snapshot/snapshot.h"

namespace tae::snapshot {
namespace {

// Debian's Abseil has its own string_view type, distinct from std::string_view.
absl::string_view Av(std::string_view text) { return absl::string_view(text.data(), text.size()); }

absl::Status PathError(std::string_view path, absl::string_view reason) {
  return absl::InvalidArgumentError(
      absl::StrCat("path \"", absl::CHexEscape(Av(path)), "\" ", reason));
}

std::string OctalMode(uint32_t mode) {
  std::string text(4, '0');
  for (int i = 3; i >= 0; --i) {
    text[i] = static_cast<char>('0' + (mode & 7));
    mode >>= 3;
  }
  return text;
}

absl::Status LineError(size_t line_number, absl::string_view reason) {
  return absl::InvalidArgumentError(absl::StrCat("manifest line ", line_number, ": ", reason));
}

absl::StatusOr<Entry> ParseLine(std::string_view line, size_t line_number) {
  Entry entry;
  size_t first = line.find(' ');
  size_t second = first == std::string_view::npos ? first : line.find(' ', first + 1);
  size_t third = second == std::string_view::npos ? second : line.find(' ', second + 1);
  if (third == std::string_view::npos) {
    return LineError(line_number, "expected `mode size sha256 path`");
  }
  std::string_view mode = line.substr(0, first);
  std::string_view size = line.substr(first + 1, second - first - 1);
  std::string_view sha = line.substr(second + 1, third - second - 1);
  std::string_view path = line.substr(third + 1);
  if (mode.size() != 4 || mode[0] != '0') {
    return LineError(line_number, absl::StrCat("mode \"", absl::CHexEscape(Av(mode)),
                                               "\" is not four octal digits from 0000 to 0777"));
  }
  for (char c : mode) {
    if (c < '0' || c > '7') {
      return LineError(line_number, absl::StrCat("mode \"", absl::CHexEscape(Av(mode)),
                                                 "\" is not four octal digits from 0000 to 0777"));
    }
    entry.mode = entry.mode * 8 + static_cast<uint32_t>(c - '0');
  }
  bool digits = !size.empty() && size.find_first_not_of("0123456789") == std::string_view::npos;
  if (!digits || (size.size() > 1 && size[0] == '0') || !absl::SimpleAtoi(Av(size), &entry.size)) {
    return LineError(line_number, absl::StrCat("size \"", absl::CHexEscape(Av(size)),
                                               "\" is not a decimal number without leading zeros"));
  }
  if (sha.size() != 64 || sha.find_first_not_of("0123456789abcdef") != std::string_view::npos) {
    return LineError(line_number, absl::StrCat("sha256 \"", absl::CHexEscape(Av(sha)),
                                               "\" is not 64 lowercase hex digits"));
  }
  entry.sha256 = std::string(sha);
  if (absl::Status status = CheckRelativePath(path); !status.ok()) {
    return LineError(line_number, status.message());
  }
  entry.path = std::string(path);
  return entry;
}

}  // namespace

absl::Status CheckRelativePath(std::string_view path) {
  if (path.empty()) {
    return absl::InvalidArgumentError("path is empty");
  }
  if (path.find('\0') != std::string_view::npos) {
    return PathError(path, "contains a NUL byte");
  }
  if (path.find('\n') != std::string_view::npos || path.find('\r') != std::string_view::npos) {
    return PathError(path, "contains a line break");
  }
  if (!IsValidUtf8(path)) {
    return PathError(path, "is not valid UTF-8");
  }
  if (path.find('\\') != std::string_view::npos) {
    return PathError(path, "contains a backslash");
  }
  if (path[0] == '/') {
    return PathError(path, "is absolute");
  }
  size_t start = 0;
  while (true) {
    size_t end = path.find('/', start);
    std::string_view component =
        path.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (component.empty()) {
      return PathError(path, "has an empty component");
    }
    if (component == ".") {
      return PathError(path, "has a '.' component");
    }
    if (component == "..") {
      return PathError(path, "has a '..' component");
    }
    if (end == std::string_view::npos) {
      return absl::OkStatus();
    }
    start = end + 1;
  }
}

std::string ManifestText(const std::vector<Entry>& entries) {
  std::string text;
  for (const Entry& entry : entries) {
    absl::StrAppend(&text, OctalMode(entry.mode), " ", entry.size, " ", entry.sha256, " ",
                    entry.path, "\n");
  }
  return text;
}

std::string SnapshotId(const std::vector<Entry>& entries) {
  return Sha256Hex(ManifestText(entries));
}

absl::StatusOr<std::vector<Entry>> ParseManifest(std::string_view text) {
  std::vector<Entry> entries;
  size_t line_number = 0;
  while (!text.empty()) {
    ++line_number;
    size_t end = text.find('\n');
    if (end == std::string_view::npos) {
      return LineError(line_number, "does not end with a newline");
    }
    absl::StatusOr<Entry> entry = ParseLine(text.substr(0, end), line_number);
    if (!entry.ok()) {
      return entry.status();
    }
    if (!entries.empty() && !(entries.back().path < entry->path)) {
      return LineError(line_number, absl::StrCat("path \"", absl::CHexEscape(entry->path),
                                                 "\" is not after the previous one (unsorted "
                                                 "or duplicate)"));
    }
    entries.push_back(*std::move(entry));
    text.remove_prefix(end + 1);
  }
  return entries;
}

}  // namespace tae::snapshot
