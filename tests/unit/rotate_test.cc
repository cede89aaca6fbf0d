// A daemon's log file rotated by size (common/log/rotate.h).
#include "common/log/rotate.h"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/unit/temp_dir.h"

namespace tae::log {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

void Say(const std::string& text) { REQUIRE(write(STDERR_FILENO, text.data(), text.size()) > 0); }

TEST_CASE("stderr as a file is rotated past its size, keeping so many, and written on afresh",
          "[log]") {
  testing::TempDir dir;
  const std::string log = dir.path() + "/taed.log";
  const int saved = dup(STDERR_FILENO);
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  REQUIRE(fd >= 0);
  dup2(fd, STDERR_FILENO);
  close(fd);
  Say("first\n");
  const bool below = RotateStderr(1000, 2);  // 6 bytes: not yet
  Say(std::string(1000, 'a') + "\n");
  const bool one = RotateStderr(1000, 2);
  Say("second\n");
  const bool small = RotateStderr(1000, 2);
  Say(std::string(1000, 'b') + "\n");
  const bool two = RotateStderr(1000, 2);
  Say(std::string(1000, 'c') + "\n");
  const bool three = RotateStderr(1000, 2);
  Say("now\n");
  dup2(saved, STDERR_FILENO);
  close(saved);
  CHECK_FALSE(below);
  CHECK(one);
  CHECK_FALSE(small);
  CHECK(two);
  CHECK(three);
  CHECK(Read(log) == "now\n");
  CHECK(Read(log + ".1") == std::string(1000, 'c') + "\n");
  CHECK(Read(log + ".2") == "second\n" + std::string(1000, 'b') + "\n");
  CHECK_FALSE(std::filesystem::exists(log + ".3"));  // the oldest went
  CHECK(std::filesystem::status(log).permissions() ==
        (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
}

TEST_CASE("stderr that is not a file is left as it is", "[log]") {
  int pipe_fds[2];
  REQUIRE(pipe(pipe_fds) == 0);
  const int saved = dup(STDERR_FILENO);
  dup2(pipe_fds[1], STDERR_FILENO);
  const bool rotated = RotateStderr(0, 2);
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  CHECK_FALSE(rotated);
}

}  // namespace
}  // namespace tae::log
