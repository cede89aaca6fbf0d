// TreeWatcher (client/watch): recursive inotify watches on real temp directories. The watcher
// blocks in poll(); tests change files and then wait, with a generous deadline, until the
// watcher reports the expected path. Absence is checked with a marker written afterwards: the
// kernel queues events in order, so once the marker is seen anything earlier has been seen.
#include "client/watch/watcher.h"

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "tests/unit/temp_dir.h"

namespace tae::client {
namespace {

namespace fs = std::filesystem;
using std::chrono::steady_clock;

constexpr int kQuietMs = 50;
constexpr auto kDeadline = std::chrono::seconds(20);

using tae::testing::TempDir;

std::unique_ptr<TreeWatcher> StartWatcher(
    const std::string& root, std::function<bool(const std::string&)> skip_dir = nullptr) {
  absl::StatusOr<std::unique_ptr<TreeWatcher>> watcher = TreeWatcher::Start(root, skip_dir);
  INFO(watcher.status().ToString());
  REQUIRE(watcher.ok());
  return std::move(*watcher);
}

// Every path reported until `want` is among them; fails when the deadline passes first.
std::set<std::string> CollectUntil(TreeWatcher& watcher, const std::string& want) {
  std::set<std::string> seen;
  steady_clock::time_point deadline = steady_clock::now() + kDeadline;
  while (seen.count(want) == 0) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady_clock::now());
    if (left.count() <= 0) {
      break;
    }
    absl::StatusOr<std::vector<std::string>> batch =
        watcher.WaitForChanges(kQuietMs, static_cast<int>(left.count()));
    INFO(batch.status().ToString());
    REQUIRE(batch.ok());
    if (batch->empty()) {
      break;  // timed out
    }
    seen.insert(batch->begin(), batch->end());
  }
  INFO("waiting for " << want << ", seen: " << absl::StrJoin(seen, " "));
  REQUIRE(seen.count(want) == 1);
  return seen;
}

// The paths in `seen` equal to `dir` or below it.
std::vector<std::string> Under(const std::set<std::string>& seen, const std::string& dir) {
  std::vector<std::string> found;
  for (const std::string& path : seen) {
    if (path == dir || path.rfind(dir + "/", 0) == 0) {
      found.push_back(path);
    }
  }
  return found;
}

TEST_CASE("TreeWatcher reports a file written in the root", "[watch]") {
  TempDir dir;
  std::unique_ptr<TreeWatcher> watcher = StartWatcher(dir.path());
  CHECK(watcher->watched_dirs() == 1);

  dir.Write("train.py", "print(1)");
  std::set<std::string> seen = CollectUntil(*watcher, "train.py");
  CHECK(seen == std::set<std::string>{"train.py"});

  dir.Write("train.py", "print(2)");  // a modification of an existing file
  CollectUntil(*watcher, "train.py");
}

TEST_CASE("TreeWatcher reports attribute changes", "[watch]") {
  TempDir dir;
  dir.Write("run.sh");
  std::unique_ptr<TreeWatcher> watcher = StartWatcher(dir.path());

  fs::permissions(dir.Full("run.sh"), fs::perms::owner_exec, fs::perm_options::add);
  CollectUntil(*watcher, "run.sh");
}

TEST_CASE("TreeWatcher watches directories created after Start by mkdir -p", "[watch]") {
  TempDir dir;
  std::unique_ptr<TreeWatcher> watcher = StartWatcher(dir.path());

  // Both happen before the watcher reads the creation of `a`, so a/b/c and f exist before any
  // watch below the root does: only the scan of new directories can find f.
  fs::create_directories(dir.Full("a/b/c"));
  dir.Write("a/b/c/f");
  std::set<std::string> seen = CollectUntil(*watcher, "a/b/c/f");
  CHECK(seen.count("a") == 1);
  CHECK(seen.count("a/b") == 1);
  CHECK(seen.count("a/b/c") == 1);
  CHECK(watcher->watched_dirs() == 4);

  // Later writes inside the new directory come through its own watch.
  dir.Write("a/b/c/f", "changed");
  CollectUntil(*watcher, "a/b/c/f");
  dir.Write("a/b/c/g");
  CollectUntil(*watcher, "a/b/c/g");
}

TEST_CASE("TreeWatcher reports deletes and renames of files and directories", "[watch]") {
  TempDir dir;
  TempDir outside;
  dir.Write("gone.txt");
  dir.Write("d/old.txt");
  dir.Write("moved/inner.txt");
  std::unique_ptr<TreeWatcher> watcher = StartWatcher(dir.path());
  REQUIRE(watcher->watched_dirs() == 3);

  fs::remove(dir.Full("gone.txt"));
  CollectUntil(*watcher, "gone.txt");

  fs::rename(dir.Full("d/old.txt"), dir.Full("d/new.txt"));
  std::set<std::string> seen = CollectUntil(*watcher, "d/new.txt");
  CHECK(seen.count("d/old.txt") == 1);

  // A directory renamed inside the tree is watched under its new name.
  fs::rename(dir.Full("moved"), dir.Full("renamed"));
  seen = CollectUntil(*watcher, "renamed");
  CHECK(seen.count("moved") == 1);
  dir.Write("renamed/inner.txt", "changed");
  CollectUntil(*watcher, "renamed/inner.txt");
  CHECK(watcher->watched_dirs() == 3);

  // Moved out: reported, and no longer watched.
  fs::rename(dir.Full("renamed"), outside.Full("renamed"));
  CollectUntil(*watcher, "renamed");
  CHECK(watcher->watched_dirs() == 2);
  outside.Write("renamed/inner.txt", "outside");
  dir.Write("marker");
  seen = CollectUntil(*watcher, "marker");
  CHECK(Under(seen, "renamed").empty());

  // Moved in: its existing contents are reported and it is watched.
  fs::rename(outside.Full("renamed"), dir.Full("back"));
  CollectUntil(*watcher, "back/inner.txt");
  CHECK(watcher->watched_dirs() == 3);
  dir.Write("back/more.txt");
  CollectUntil(*watcher, "back/more.txt");

  // A deleted directory tree: its files and itself are reported, its watch is dropped.
  fs::remove_all(dir.Full("d"));
  seen = CollectUntil(*watcher, "d");
  CHECK(seen.count("d/new.txt") == 1);
  dir.Write("marker2");
  CollectUntil(*watcher, "marker2");
  CHECK(watcher->watched_dirs() == 2);
}

TEST_CASE("TreeWatcher ignores .git directories", "[watch]") {
  TempDir dir;
  dir.Write(".git/HEAD", "ref: refs/heads/main");
  dir.Write("src/main.cc");
  std::unique_ptr<TreeWatcher> watcher = StartWatcher(dir.path());
  CHECK(watcher->watched_dirs() == 2);

  dir.Write(".git/HEAD", "ref: refs/heads/other");
  dir.Write(".git/objects/ab/cdef");
  dir.Write("src/.git/config");  // a .git created after Start
  dir.Write("src/main.cc", "changed");
  dir.Write("marker");
  std::set<std::string> seen = CollectUntil(*watcher, "marker");
  CHECK(seen.count("src/main.cc") == 1);
  for (const std::string& path : seen) {
    INFO(path);
    CHECK(path.find(".git") == std::string::npos);
  }
  CHECK(watcher->watched_dirs() == 2);
}

TEST_CASE("TreeWatcher does not watch directories skip_dir rejects", "[watch]") {
  TempDir dir;
  dir.Write("build/a.o");
  dir.Write("out/gen/x.h");
  std::vector<std::string> asked;
  auto skip = [&asked](const std::string& rel) {
    asked.push_back(rel);
    return rel == "build" || rel == "out/gen" || rel == "late";
  };
  std::unique_ptr<TreeWatcher> watcher = StartWatcher(dir.path(), skip);
  CHECK(watcher->watched_dirs() == 2);  // the root and out
  std::sort(asked.begin(), asked.end());
  CHECK(asked == std::vector<std::string>{"build", "out", "out/gen"});

  dir.Write("build/a.o", "relinked");
  dir.Write("build/sub/b.o");
  dir.Write("out/gen/x.h", "regenerated");
  dir.Write("late/y");  // a skipped directory created after Start
  dir.Write("out/kept.txt");
  dir.Write("marker");
  std::set<std::string> seen = CollectUntil(*watcher, "marker");
  CHECK(seen.count("out/kept.txt") == 1);
  CHECK(Under(seen, "build").empty());
  CHECK(Under(seen, "out/gen").empty());
  CHECK(Under(seen, "late").empty());
  CHECK(watcher->watched_dirs() == 2);
}

TEST_CASE("TreeWatcher reports a burst of writes as one batch", "[watch]") {
  TempDir dir;
  std::unique_ptr<TreeWatcher> watcher = StartWatcher(dir.path());
  std::vector<std::string> expected;
  for (int i = 0; i < 50; ++i) {
    expected.push_back("burst_" + std::to_string(100 + i));
  }

  // The writer paces itself (1 ms apart) to spread the burst; the quiet period is far longer.
  std::thread writer([&dir, &expected] {
    for (const std::string& name : expected) {
      std::ofstream(dir.Full(name)) << name;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  absl::StatusOr<std::vector<std::string>> batch =
      watcher->WaitForChanges(/*quiet_ms=*/1000, /*timeout_ms=*/20000);
  writer.join();
  REQUIRE(batch.ok());
  CHECK(*batch == expected);
}

TEST_CASE("TreeWatcher ends a batch after max_batch_ms while writes go on", "[watch]") {
  TempDir dir;
  std::unique_ptr<TreeWatcher> watcher = StartWatcher(dir.path());
  constexpr int kWrites = 5000;  // at 1 ms apart, several seconds of writing
  std::atomic<bool> stop{false};
  std::atomic<bool> finished{false};
  std::thread writer([&] {
    for (int i = 0; i < kWrites && !stop; ++i) {
      std::ofstream(dir.Full("f" + std::to_string(i % 100))) << i;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    finished = true;
  });
  absl::StatusOr<std::vector<std::string>> batch = watcher->WaitForChanges(
      /*quiet_ms=*/2000, /*timeout_ms=*/20000, /*max_batch_ms=*/200);
  // Without the cap the batch could only end once the writer had stopped for 2 s.
  bool writer_finished_first = finished;
  stop = true;
  writer.join();
  REQUIRE(batch.ok());
  CHECK_FALSE(batch->empty());
  CHECK_FALSE(writer_finished_first);
}

TEST_CASE("TreeWatcher returns no changes when the timeout passes quietly", "[watch]") {
  TempDir dir;
  dir.Write("existing.txt");
  std::unique_ptr<TreeWatcher> watcher = StartWatcher(dir.path());
  absl::StatusOr<std::vector<std::string>> batch = watcher->WaitForChanges(kQuietMs, 100);
  REQUIRE(batch.ok());
  CHECK(batch->empty());
}

TEST_CASE("TreeWatcher reports a queue overflow as a rescan and keeps working", "[watch]") {
  TempDir dir;
  std::unique_ptr<TreeWatcher> watcher = StartWatcher(dir.path());
  int max_queued = 16384;
  std::ifstream("/proc/sys/fs/inotify/max_queued_events") >> max_queued;
  REQUIRE(max_queued <= 1000000);  // more files than a unit test should write

  // Each file gives at least IN_CREATE and IN_CLOSE_WRITE; nothing is read meanwhile.
  fs::create_directories(dir.Full("many"));
  dir.Write("many/keep");  // many/ is watched once its creation is read
  for (int i = 0; i < max_queued / 2 + 64; ++i) {
    std::ofstream(dir.Full("f" + std::to_string(i))) << "x";
  }
  fs::create_directories(dir.Full("lost"));  // its creation event is dropped
  absl::StatusOr<std::vector<std::string>> batch = watcher->WaitForChanges(kQuietMs, 20000);
  REQUIRE(batch.ok());
  CHECK(*batch == std::vector<std::string>{"*"});

  // Watches were re-synced with the tree: the directory whose creation was lost is watched.
  dir.Write("lost/x");
  CollectUntil(*watcher, "lost/x");
  CHECK(watcher->watched_dirs() == 3);
}

TEST_CASE("TreeWatcher fails once the root is deleted", "[watch]") {
  TempDir dir;
  fs::create_directories(dir.Full("root"));
  std::unique_ptr<TreeWatcher> watcher = StartWatcher(dir.Full("root"));
  fs::remove(dir.Full("root"));
  absl::StatusOr<std::vector<std::string>> batch = watcher->WaitForChanges(kQuietMs, 20000);
  REQUIRE_FALSE(batch.ok());
  CHECK(batch.status().code() == absl::StatusCode::kFailedPrecondition);
}

TEST_CASE("TreeWatcher refuses a missing root or a file", "[watch]") {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<TreeWatcher>> missing = TreeWatcher::Start(dir.path() + "/nope");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK(missing.status().message().find("nope") != absl::string_view::npos);

  dir.Write("file");
  absl::StatusOr<std::unique_ptr<TreeWatcher>> file = TreeWatcher::Start(dir.path() + "/file");
  REQUIRE_FALSE(file.ok());
  CHECK(file.status().code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tae::client
