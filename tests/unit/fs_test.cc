// common/fs: atomic replacement, whole-file reads and errno statuses.

#include "common/fs/fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/temp_dir.h"

namespace {

using tae::testing::TempDir;

int FilesIn(const std::string& dir) {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    (void)entry;
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("fs: a file is replaced whole, with its mode, leaving no temporary file") {
  TempDir dir;
  const std::string path = dir.path() + "/start.pb";
  for (tae::fs::Durability durability :
       {tae::fs::Durability::kNone, tae::fs::Durability::kFile, tae::fs::Durability::kFileAndDir}) {
    REQUIRE(tae::fs::WriteFileAtomically(path, "first", {0640, durability}).ok());
    REQUIRE(tae::fs::WriteFileAtomically(path, std::string(100000, 'x'), {0640, durability}).ok());
    absl::StatusOr<std::string> read = tae::fs::ReadFile(path);
    REQUIRE(read.ok());
    CHECK(*read == std::string(100000, 'x'));
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0640);
    CHECK(FilesIn(dir.path()) == 1);
  }
}

TEST_CASE("fs: writers of one path at once never leave it partial") {
  TempDir dir;
  const std::string path = dir.path() + "/cache";
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < 50; ++i) {
        CHECK(tae::fs::WriteFileAtomically(path, std::string(4096 * (w + 1), 'a' + w)).ok());
      }
    });
  }
  for (std::thread& t : writers) {
    t.join();
  }
  absl::StatusOr<std::string> read = tae::fs::ReadFile(path);
  REQUIRE(read.ok());
  REQUIRE_FALSE(read->empty());
  const char c = (*read)[0];
  CHECK(read->size() == 4096u * static_cast<size_t>(c - 'a' + 1));
  CHECK(read->find_first_not_of(c) == std::string::npos);
  CHECK(FilesIn(dir.path()) == 1);
}

TEST_CASE("fs: a failed replacement keeps the old file, errors name the path with errno's code") {
  TempDir dir;
  const std::string missing_dir = dir.path() + "/nope/file";
  absl::Status s = tae::fs::WriteFileAtomically(missing_dir, "x");
  CHECK(absl::IsNotFound(s));
  CHECK(std::string(s.message()).find(dir.path() + "/nope/file.tmp.") != std::string::npos);

  absl::StatusOr<std::string> read = tae::fs::ReadFile(dir.path() + "/absent");
  CHECK(absl::IsNotFound(read.status()));
  CHECK(read.status().message() ==
        "cannot open " + dir.path() + "/absent: No such file or directory");
  CHECK(absl::IsResourceExhausted(tae::fs::ErrnoStatus(ENOSPC, "write", "/x")));
  CHECK(absl::IsPermissionDenied(tae::fs::ErrnoStatus(EACCES, "open", "/x")));

  // /proc files report size 0 and are read to their end all the same.
  absl::StatusOr<std::string> self = tae::fs::ReadFile("/proc/self/status");
  REQUIRE(self.ok());
  CHECK(self->find("Pid:") != std::string::npos);

  tae::fs::Fd fd(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY));
  CHECK(fd.valid());
  CHECK(fd.Close(dir.path()).ok());
  CHECK_FALSE(fd.valid());
}
