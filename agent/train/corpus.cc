#include "agent/train/corpus.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/fs/fs.h"

namespace tae::train {
namespace {

constexpr char kBibleCommand[] = "bible -f gen1:1-rev22:21";
constexpr size_t kMinKjvBytes = 1 << 20;  // the full text is ~4.4 MB

bool OnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) {
    return false;
  }
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    const std::string candidate = absl::StrCat(dir, "/", program);
    if (::access(candidate.c_str(), X_OK) == 0) {
      return true;
    }
  }
  return false;
}

absl::StatusOr<std::string> RunBible() {
  if (!OnPath("bible")) {
    return absl::FailedPreconditionError(
        "lm task: train.data is empty, so the King James Bible is used, but the `bible` program "
        "is not on PATH: install it with `apt-get install bible-kjv` or set train.data");
  }
  FILE* pipe = ::popen(kBibleCommand, "r");
  if (pipe == nullptr) {
    return absl::InternalError(
        absl::StrCat("lm task: cannot run `", kBibleCommand, "`: ", std::strerror(errno)));
  }
  std::string text;
  char buffer[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) {
    text.append(buffer, n);
  }
  const int status = ::pclose(pipe);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
      text.size() < kMinKjvBytes) {
    return absl::InternalError(absl::StrCat("lm task: `", kBibleCommand, "` failed (status ",
                                            status, ", ", text.size(),
                                            " bytes); is bible-kjv installed completely?"));
  }
  return text;
}

// Writes `text` to `path` (its directory created first) atomically: several tae-train processes
// may create the cache at once.
absl::Status WriteAtomically(const std::string& path, const std::string& text) {
  std::error_code error;
  const std::filesystem::path target(path);
  std::filesystem::create_directories(target.parent_path(), error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create ", target.parent_path().string(), ": ", error.message()));
  }
  // 0644: the cache is plain public text.
  return fs::WriteFileAtomically(path, text, {0644, fs::Durability::kFile});
}

}  // namespace

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    return absl::NotFoundError(
        absl::StrCat("lm task: train.data \"", path, "\" is a directory, not a text file"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("lm task: cannot read train.data file \"", path,
                                            "\": ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string DefaultKjvCachePath() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  std::string base;
  if (xdg != nullptr && xdg[0] == '/') {
    base = xdg;
  } else {
    const char* home = std::getenv("HOME");
    base = absl::StrCat(home != nullptr ? home : "/tmp", "/.cache");
  }
  return absl::StrCat(base, "/tae/kjv.txt");
}

absl::StatusOr<std::string> LoadKjvText(const std::string& cache_path) {
  std::error_code error;
  if (std::filesystem::file_size(cache_path, error) >= kMinKjvBytes && !error) {
    absl::StatusOr<std::string> cached = ReadTextFile(cache_path);
    if (cached.ok()) {
      return cached;
    }
  }
  absl::StatusOr<std::string> text = RunBible();
  if (!text.ok()) {
    return text.status();
  }
  if (absl::Status status = WriteAtomically(cache_path, *text); !status.ok()) {
    std::cerr << "tae-train: warning: KJV cache not written: " << status.message() << "\n";
  }
  return text;
}

}  // namespace tae::train
