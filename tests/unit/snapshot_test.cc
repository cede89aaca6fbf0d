#include "common/snapshot/snapshot.h"

#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/unit/temp_dir.h"

namespace tae::snapshot {
namespace {

namespace fs = std::filesystem;

using tae::testing::TempDir;

std::vector<std::string> Paths(const Walk& walk) {
  std::vector<std::string> paths;
  for (const Entry& entry : walk.files) {
    paths.push_back(entry.path);
  }
  return paths;
}

std::string WalkError(const std::string& root) {
  absl::StatusOr<Walk> walk = WalkTree(root);
  REQUIRE_FALSE(walk.ok());
  CHECK(walk.status().code() == absl::StatusCode::kInvalidArgument);
  return std::string(walk.status().message());
}

}  // namespace

TEST_CASE("SHA-256 of known contents", "[snapshot]") {
  CHECK(Sha256Hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(Sha256Hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");

  TempDir dir;
  dir.Write("empty", "");
  dir.Write("abc", "abc");
  absl::StatusOr<Walk> walk = WalkTree(dir.path());
  REQUIRE(walk.ok());
  REQUIRE(walk->files.size() == 2);
  CHECK(walk->files[0].path == "abc");
  CHECK(walk->files[0].size == 3);
  CHECK(walk->files[0].sha256 == Sha256Hex("abc"));
  CHECK(walk->files[1].path == "empty");
  CHECK(walk->files[1].size == 0);
  CHECK(walk->files[1].sha256 == Sha256Hex(""));
  CHECK(walk->total_bytes == 3);
}

TEST_CASE("a file larger than one hashing chunk hashes like the whole string", "[snapshot]") {
  TempDir dir;
  std::string big((size_t{1} << 20) * 2 + 17, 'x');
  dir.Write("big", big);
  absl::StatusOr<Walk> walk = WalkTree(dir.path());
  REQUIRE(walk.ok());
  REQUIRE(walk->files.size() == 1);
  CHECK(walk->files[0].size == big.size());
  CHECK(walk->files[0].sha256 == Sha256Hex(big));
}

TEST_CASE("glob patterns", "[snapshot]") {
  CHECK(GlobMatch("*.o", "main.o"));
  CHECK_FALSE(GlobMatch("*.o", "dir/main.o"));
  CHECK(GlobMatch("a?c", "abc"));
  CHECK_FALSE(GlobMatch("a?c", "a/c"));
  CHECK(GlobMatch("[abc].txt", "b.txt"));
  CHECK_FALSE(GlobMatch("[abc].txt", "d.txt"));
  CHECK(GlobMatch("[a-c]x", "bx"));
  CHECK(GlobMatch("[!a]x", "bx"));
  CHECK_FALSE(GlobMatch("[!a]x", "ax"));
  CHECK(GlobMatch("**/build", "build"));
  CHECK(GlobMatch("**/build", "x/y/build"));
  CHECK(GlobMatch("logs/**", "logs/a/b.txt"));
  CHECK_FALSE(GlobMatch("logs/**", "logs"));
  CHECK(GlobMatch("a/**/b", "a/b"));
  CHECK(GlobMatch("a/**/b", "a/x/y/b"));
  CHECK_FALSE(GlobMatch("a/**/b", "a/x/c"));
  CHECK(GlobMatch("\\#x", "#x"));
}

TEST_CASE("ignore rules: negation, dir-only, anchoring, later rules win", "[snapshot]") {
  IgnoreMatcher matcher;
  matcher.AddRules("", "# comment\n\n*.log\n!keep.log\nbuild/\n/top.txt\ndocs/*.tmp\n");
  matcher.AddRules("sub", "/local.txt\n!*.log\n");
  CHECK(matcher.Ignored("a.log", false));
  CHECK(matcher.Ignored("x/y/a.log", false));
  CHECK_FALSE(matcher.Ignored("keep.log", false));
  CHECK(matcher.Ignored("build", true));
  CHECK_FALSE(matcher.Ignored("build", false));  // dir-only
  CHECK(matcher.Ignored("x/build", true));
  CHECK(matcher.Ignored("top.txt", false));
  CHECK_FALSE(matcher.Ignored("x/top.txt", false));  // anchored by the leading '/'
  CHECK(matcher.Ignored("docs/a.tmp", false));
  CHECK_FALSE(matcher.Ignored("x/docs/a.tmp", false));  // anchored by the inner '/'
  CHECK(matcher.Ignored("sub/local.txt", false));
  CHECK_FALSE(matcher.Ignored("sub/deeper/local.txt", false));
  CHECK_FALSE(matcher.Ignored("local.txt", false));  // outside sub/
  CHECK_FALSE(matcher.Ignored("sub/a.log", false));  // sub's negation is later
  CHECK(matcher.Ignored("other/a.log", false));
}

TEST_CASE("WalkTree honours nested .gitignore and .taeignore files and skips .git", "[snapshot]") {
  TempDir dir;
  dir.Write(".gitignore", "*.log\nbuild/\n/out\n");
  dir.Write(".git/HEAD", "ref: refs/heads/main\n");
  dir.Write("main.cc", "int main() {}\n");
  dir.Write("debug.log", "x");
  dir.Write("build/a.o", "x");
  dir.Write("out", "x");
  dir.Write("src/out", "kept: /out is anchored to the root");
  dir.Write("src/.taeignore", "!important.log\ndata/**\n");
  dir.Write("src/important.log", "kept by negation");
  dir.Write("src/other.log", "x");
  dir.Write("src/data/x/y.bin", "x");
  dir.Write("src/data.txt", "kept");
  dir.Write("lib/.gitignore", "*.txt\n");
  dir.Write("lib/.taeignore", "!keep.txt\n");
  dir.Write("lib/keep.txt", "kept: .taeignore comes after .gitignore");
  dir.Write("lib/drop.txt", "x");
  dir.Write("lib/sub/build", "a file, not a directory: build/ does not match");

  absl::StatusOr<Walk> walk = WalkTree(dir.path());
  REQUIRE(walk.ok());
  CHECK(Paths(*walk) == std::vector<std::string>{".gitignore", "lib/.gitignore", "lib/.taeignore",
                                                 "lib/keep.txt", "lib/sub/build", "main.cc",
                                                 "src/.taeignore", "src/data.txt",
                                                 "src/important.log", "src/out"});
  CHECK(walk->excluded == std::vector<std::string>{".git/", "build/", "debug.log", "lib/drop.txt",
                                                   "out", "src/data/x/", "src/other.log"});
}

TEST_CASE("WalkTree sorts files and keeps the executable bit", "[snapshot]") {
  TempDir dir;
  dir.Write("z.txt", "z");
  dir.Write("a/b.txt", "b");
  dir.Write("a.txt", "a");
  dir.Write("run.sh", "#!/bin/sh\n");
  REQUIRE(chmod((dir.path() + "/run.sh").c_str(), 0755) == 0);
  REQUIRE(chmod((dir.path() + "/z.txt").c_str(), 0600) == 0);
  absl::StatusOr<Walk> walk = WalkTree(dir.path());
  REQUIRE(walk.ok());
  CHECK(Paths(*walk) == std::vector<std::string>{"a.txt", "a/b.txt", "run.sh", "z.txt"});
  CHECK(walk->files[2].mode == 0755);
  CHECK(walk->files[3].mode == 0644);
}

TEST_CASE("a symlink inside the tree is stored as the file it points to", "[snapshot]") {
  TempDir dir;
  dir.Write("real/data.txt", "payload");
  REQUIRE(symlink("real/data.txt", (dir.path() + "/link.txt").c_str()) == 0);
  absl::StatusOr<Walk> walk = WalkTree(dir.path());
  REQUIRE(walk.ok());
  REQUIRE(Paths(*walk) == std::vector<std::string>{"link.txt", "real/data.txt"});
  CHECK(walk->files[0].sha256 == Sha256Hex("payload"));
  CHECK(walk->files[0].size == 7);
}

TEST_CASE("a symlink leaving the tree is rejected by name", "[snapshot]") {
  TempDir dir;
  TempDir outside;
  outside.Write("secret", "x");
  dir.Write("sub/ok.txt", "x");
  REQUIRE(symlink((outside.path() + "/secret").c_str(), (dir.path() + "/sub/escape").c_str()) == 0);
  std::string message = WalkError(dir.path());
  CHECK_THAT(message, Catch::Contains("sub/escape") && Catch::Contains("outside the tree"));

  REQUIRE(unlink((dir.path() + "/sub/escape").c_str()) == 0);
  REQUIRE(symlink("../../..", (dir.path() + "/sub/up").c_str()) == 0);
  CHECK_THAT(WalkError(dir.path()), Catch::Contains("sub/up"));

  dir.Write(".taeignore", "sub/up\n");  // an ignored symlink is not looked at
  CHECK(WalkTree(dir.path()).ok());
}

TEST_CASE("a fifo is rejected by name", "[snapshot]") {
  TempDir dir;
  REQUIRE(mkfifo((dir.path() + "/pipe").c_str(), 0644) == 0);
  CHECK_THAT(WalkError(dir.path()), Catch::Contains("pipe") && Catch::Contains("fifo"));
}

TEST_CASE("names with invalid UTF-8 or a newline are rejected", "[snapshot]") {
  {
    TempDir dir;
    dir.Write("bad\xff\xfename", "x");
    CHECK_THAT(WalkError(dir.path()), Catch::Contains("UTF-8") && Catch::Contains("bad\\xff"));
  }
  {
    TempDir dir;
    dir.Write("two\nlines", "x");
    CHECK_THAT(WalkError(dir.path()), Catch::Contains("line break"));
  }
  CHECK(IsValidUtf8("h\xc3\xa9llo"));
  CHECK_FALSE(IsValidUtf8("\xc0\xaf"));      // overlong '/'
  CHECK_FALSE(IsValidUtf8("\xed\xa0\x80"));  // surrogate
  CHECK_FALSE(IsValidUtf8("\xe2\x82"));      // truncated
}

TEST_CASE("CheckRelativePath rejects unsafe paths and says why", "[snapshot]") {
  CHECK(CheckRelativePath("a/b/c.txt").ok());
  CHECK(CheckRelativePath("h\xc3\xa9/..x").ok());
  auto message = [](std::string_view path) {
    absl::Status status = CheckRelativePath(path);
    REQUIRE_FALSE(status.ok());
    CHECK(status.code() == absl::StatusCode::kInvalidArgument);
    return std::string(status.message());
  };
  CHECK_THAT(message("../x"), Catch::Contains("../x") && Catch::Contains("'..'"));
  CHECK_THAT(message("/etc/passwd"), Catch::Contains("/etc/passwd") && Catch::Contains("absolute"));
  CHECK_THAT(message("a/../../b"), Catch::Contains("'..'"));
  CHECK_THAT(message("a//b"), Catch::Contains("empty component"));
  CHECK_THAT(message("a/"), Catch::Contains("empty component"));
  CHECK_THAT(message("./a"), Catch::Contains("'.'"));
  CHECK_THAT(message("a\\b"), Catch::Contains("backslash"));
  CHECK_THAT(message(std::string_view("a\0b", 3)), Catch::Contains("NUL"));
  CHECK_THAT(message("a\xff"), Catch::Contains("UTF-8"));
  CHECK_THAT(message(""), Catch::Contains("empty"));
}

TEST_CASE("manifest text round-trips and bad manifests name the line", "[snapshot]") {
  std::vector<Entry> entries = {
      {"a b.txt", 0644, 3, Sha256Hex("abc")},
      {"bin/run.sh", 0755, 0, Sha256Hex("")},
  };
  std::string text = ManifestText(entries);
  CHECK(text ==
        "0644 3 " + Sha256Hex("abc") + " a b.txt\n0755 0 " + Sha256Hex("") + " bin/run.sh\n");
  absl::StatusOr<std::vector<Entry>> parsed = ParseManifest(text);
  REQUIRE(parsed.ok());
  REQUIRE(parsed->size() == 2);
  CHECK((*parsed)[0].path == "a b.txt");
  CHECK((*parsed)[1].mode == 0755);
  CHECK(ManifestText(*parsed) == text);
  CHECK(SnapshotId(*parsed) == Sha256Hex(text));

  auto error = [](const std::string& bad) {
    absl::StatusOr<std::vector<Entry>> result = ParseManifest(bad);
    REQUIRE_FALSE(result.ok());
    return std::string(result.status().message());
  };
  std::string line1 = "0644 3 " + Sha256Hex("abc") + " a.txt\n";
  CHECK_THAT(error(line1 + "0644 3 " + Sha256Hex("abc") + " ../x\n"),
             Catch::Contains("line 2") && Catch::Contains("'..'"));
  CHECK_THAT(error("0944 3 " + Sha256Hex("abc") + " a\n"), Catch::Contains("line 1"));
  CHECK_THAT(error("0644 03 " + Sha256Hex("abc") + " a\n"), Catch::Contains("size"));
  CHECK_THAT(error("0644 3 ABC a\n"), Catch::Contains("sha256"));
  CHECK_THAT(error(line1 + line1), Catch::Contains("line 2") && Catch::Contains("duplicate"));
  CHECK_THAT(error("0644 3 " + Sha256Hex("abc") + " a"), Catch::Contains("newline"));
}

TEST_CASE("the snapshot id follows content, not mtime", "[snapshot]") {
  TempDir dir;
  dir.Write("a.txt", "hello");
  dir.Write("b/c.txt", "world");
  absl::StatusOr<Walk> first = WalkTree(dir.path());
  REQUIRE(first.ok());
  std::string id = SnapshotId(first->files);
  CHECK(id.size() == 64);

  timeval times[2] = {{1000000000, 0}, {1000000000, 0}};
  REQUIRE(utimes((dir.path() + "/a.txt").c_str(), times) == 0);
  absl::StatusOr<Walk> touched = WalkTree(dir.path());
  REQUIRE(touched.ok());
  CHECK(SnapshotId(touched->files) == id);

  dir.Write("a.txt", "hellp");
  absl::StatusOr<Walk> changed = WalkTree(dir.path());
  REQUIRE(changed.ok());
  CHECK(SnapshotId(changed->files) != id);
}

}  // namespace tae::snapshot

namespace tae::snapshot {

TEST_CASE("the root's directories are walked in parallel and the first error in path order wins",
          "[snapshot]") {
  TempDir dir;
  // Twelve top-level directories (more than the walk's threads), each with files; the walk
  // gives the same files, sorted, as a sequential one would.
  for (int d = 0; d < 12; ++d) {
    for (int f = 0; f < 5; ++f) {
      dir.Write("d" + std::to_string(d) + "/sub/f" + std::to_string(f), std::to_string(d * f));
    }
  }
  dir.Write("root.txt", "at the root");
  absl::StatusOr<Walk> walk = WalkTree(dir.path());
  REQUIRE(walk.ok());
  REQUIRE(walk->files.size() == 61);
  CHECK(std::is_sorted(walk->files.begin(), walk->files.end(),
                       [](const Entry& a, const Entry& b) { return a.path < b.path; }));
  CHECK(walk->files.back().path == "root.txt");

  // Bad entries in d7/, at the root (m, after every d*) and in d3/: d3's comes first in path
  // order.
  REQUIRE(mkfifo((dir.path() + "/d7/pipe").c_str(), 0644) == 0);
  REQUIRE(mkfifo((dir.path() + "/m").c_str(), 0644) == 0);
  REQUIRE(mkfifo((dir.path() + "/d3/sub/pipe").c_str(), 0644) == 0);
  for (int round = 0; round < 5; ++round) {  // whichever thread finishes first
    absl::StatusOr<Walk> failed = WalkTree(dir.path());
    REQUIRE_FALSE(failed.ok());
    CHECK(std::string(failed.status().message()).find("d3/sub/pipe") != std::string::npos);
  }
  REQUIRE(std::filesystem::remove(dir.path() + "/d3/sub/pipe"));
  absl::StatusOr<Walk> next = WalkTree(dir.path());
  REQUIRE_FALSE(next.ok());
  CHECK(std::string(next.status().message()).find("d7/pipe") != std::string::npos);
  // A bad root entry before every directory stops the walk before any of them.
  REQUIRE(mkfifo((dir.path() + "/a-first").c_str(), 0644) == 0);
  absl::StatusOr<Walk> root_first = WalkTree(dir.path());
  REQUIRE_FALSE(root_first.ok());
  CHECK(std::string(root_first.status().message()).find("a-first") != std::string::npos);
}

}  // namespace tae::snapshot
