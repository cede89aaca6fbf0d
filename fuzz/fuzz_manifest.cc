// libFuzzer target for the snapshot manifest parser and the path check
// (common/snapshot/snapshot.h).
//
// Input: arbitrary bytes, given to ParseManifest and to CheckRelativePath. Checks:
//  - ManifestText(*ParseManifest(t)) == t for every accepted t (the documented round trip), and
//    every accepted entry has a mode <= 0777, a 64-lowercase-hex sha256, a path passing
//    CheckRelativePath, paths strictly increasing;
//  - a path CheckRelativePath accepts is non-empty, relative, valid UTF-8, and has no NUL, line
//    break, backslash, or empty, "." or ".." component;
//  - IsValidUtf8 agrees with a table-driven validator (Unicode Table 3-7) written here;
//  - a one-line manifest "0644 0 <sha> PATH\n" is accepted exactly when CheckRelativePath(PATH)
//    is OK (for inputs without '\n', so that PATH stays one line).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "common/snapshot/snapshot.h"

namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_manifest: property violated: %s\n", what);
    std::abort();
  }
}

bool IsLowerHex64(std::string_view text) {
  if (text.size() != 64) {
    return false;
  }
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return true;
}

// Well-formed UTF-8 per the Unicode Standard, Table 3-7, written independently of IsValidUtf8.
bool ReferenceUtf8(std::string_view text) {
  auto in = [](unsigned char c, unsigned lo, unsigned hi) { return c >= lo && c <= hi; };
  size_t i = 0;
  while (i < text.size()) {
    auto at = [&](size_t k) -> unsigned char {
      return i + k < text.size() ? static_cast<unsigned char>(text[i + k]) : 0;
    };
    const unsigned char b0 = at(0);
    size_t length = 0;
    unsigned lo = 0x80;
    unsigned hi = 0xBF;  // range of the second byte
    if (b0 <= 0x7F) {
      length = 1;
    } else if (in(b0, 0xC2, 0xDF)) {
      length = 2;
    } else if (b0 == 0xE0) {
      length = 3, lo = 0xA0;
    } else if (in(b0, 0xE1, 0xEC) || in(b0, 0xEE, 0xEF)) {
      length = 3;
    } else if (b0 == 0xED) {
      length = 3, hi = 0x9F;
    } else if (b0 == 0xF0) {
      length = 4, lo = 0x90;
    } else if (in(b0, 0xF1, 0xF3)) {
      length = 4;
    } else if (b0 == 0xF4) {
      length = 4, hi = 0x8F;
    } else {
      return false;
    }
    if (i + length > text.size()) {
      return false;
    }
    if (length > 1 && !in(at(1), lo, hi)) {
      return false;
    }
    for (size_t k = 2; k < length; ++k) {
      if (!in(at(k), 0x80, 0xBF)) {
        return false;
      }
    }
    i += length;
  }
  return true;
}

bool HasBadComponent(std::string_view path) {
  size_t start = 0;
  while (true) {
    size_t end = path.find('/', start);
    std::string_view component =
        path.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    if (component.empty() || component == "." || component == "..") {
      return true;
    }
    if (end == std::string_view::npos) {
      return false;
    }
    start = end + 1;
  }
}

void CheckManifest(std::string_view text) {
  absl::StatusOr<std::vector<tae::snapshot::Entry>> entries = tae::snapshot::ParseManifest(text);
  if (!entries.ok()) {
    Check(!entries.status().message().empty(), "manifest error without a message");
    return;
  }
  Check(tae::snapshot::ManifestText(*entries) == text,
        "ManifestText(*ParseManifest(t)) != t for an accepted t");
  for (size_t i = 0; i < entries->size(); ++i) {
    const tae::snapshot::Entry& entry = (*entries)[i];
    Check(entry.mode <= 0777, "mode above 0777");
    Check(IsLowerHex64(entry.sha256), "sha256 is not 64 lowercase hex digits");
    Check(tae::snapshot::CheckRelativePath(entry.path).ok(), "entry path fails CheckRelativePath");
    Check(i == 0 || (*entries)[i - 1].path < entry.path, "paths not strictly increasing");
  }
  Check(IsLowerHex64(tae::snapshot::SnapshotId(*entries)), "SnapshotId is not 64 hex digits");
}

void CheckPath(std::string_view path) {
  Check(tae::snapshot::IsValidUtf8(path) == ReferenceUtf8(path),
        "IsValidUtf8 disagrees with the Table 3-7 validator");
  absl::Status status = tae::snapshot::CheckRelativePath(path);
  if (status.ok()) {
    Check(!path.empty(), "empty path accepted");
    Check(path[0] != '/', "absolute path accepted");
    Check(path.find('\0') == std::string_view::npos, "path with NUL accepted");
    Check(path.find('\n') == std::string_view::npos, "path with a newline accepted");
    Check(path.find('\r') == std::string_view::npos, "path with a carriage return accepted");
    Check(path.find('\\') == std::string_view::npos, "path with a backslash accepted");
    Check(ReferenceUtf8(path), "invalid UTF-8 path accepted");
    Check(!HasBadComponent(path), "path with an empty, '.' or '..' component accepted");
  } else {
    Check(!status.message().empty(), "path error without a message");
  }
  if (path.find('\n') == std::string_view::npos) {
    std::string line = "0644 0 " + std::string(64, '0') + " " + std::string(path) + "\n";
    Check(tae::snapshot::ParseManifest(line).ok() == status.ok(),
          "one-line manifest accepted differently from CheckRelativePath of its path");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  CheckManifest(input);
  CheckPath(input);
  return 0;
}
