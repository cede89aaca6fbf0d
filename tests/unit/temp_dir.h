#pragma once

// A scratch directory for unit tests, shared by the tests that need files on disk.

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace tae::testing {

// A fresh directory `parent`/`prefix`-XXXXXX, removed with everything in it on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "tae-test", const std::string& parent = "/tmp") {
    std::string pattern = parent + "/" + prefix + "-XXXXXX";
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // The path of `rel` inside the directory.
  std::string Full(const std::string& rel) const { return path_ + "/" + rel; }

  // Writes `content` to the relative path `rel` (in place if it exists), creating parents.
  void Write(const std::string& rel, const std::string& content = "x") const {
    std::filesystem::path full = std::filesystem::path(path_) / rel;
    std::filesystem::create_directories(full.parent_path());
    std::ofstream out(full, std::ios::binary);
    out << content;
    REQUIRE(out.good());
  }

 private:
  std::string path_;
};

}  // namespace tae::testing
