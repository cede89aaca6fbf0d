// A job's TensorBoard files as the agent follows them (agent/runner/event_files.h): what a job
// can put there must not block or exhaust the agent.
#include "agent/runner/event_files.h"

#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "tests/unit/temp_dir.h"

namespace tae::agent {
namespace {

// One TFRecord holding `payload` (CRCs left zero: the reader skips the record as corrupt, which
// is what a prefix re-read must get through without holding the whole prefix).
std::string Record(const std::string& payload) {
  std::string out;
  const uint64_t length = payload.size();
  out.append(reinterpret_cast<const char*>(&length), 8);
  out.append(4, '\0');
  out.append(payload);
  out.append(4, '\0');
  return out;
}

TEST_CASE("a FIFO named like an event file neither blocks the agent at a restart nor is read",
          "[tensorboard]") {
  testing::TempDir dir;
  const std::string root = dir.path() + "/logs";
  std::filesystem::create_directories(root);
  dir.Write("registry", "events.out.tfevents.fifo\n");
  REQUIRE(mkfifo((root + "/events.out.tfevents.fifo").c_str(), 0600) == 0);
  EventFileFollower follower(root, dir.path() + "/registry");
  // Journaled at byte 4096 before the restart: the re-read of that prefix opens the FIFO. With no
  // writer, a blocking open would never return; this returns, having read nothing.
  REQUIRE(follower.Resume({{kFirstEventFileStream, 4096}}).ok());
  const std::vector<EventFileFollower::Read> reads = follower.Poll(true);
  for (const EventFileFollower::Read& read : reads) {
    CHECK(read.scalars.empty());
  }
}

TEST_CASE("a restart re-reads a large prefix in pieces, and goes on where it was",
          "[tensorboard]") {
  testing::TempDir dir;
  const std::string root = dir.path() + "/logs";
  std::filesystem::create_directories(root);
  // 64 MB of records before the journaled offset.
  std::string prefix;
  const std::string payload(1 << 20, 'x');
  for (int i = 0; i < 64; ++i) {
    prefix += Record(payload);
  }
  { std::ofstream(root + "/events.out.tfevents.1", std::ios::binary) << prefix; }
  dir.Write("registry", "events.out.tfevents.1\n");
  EventFileFollower follower(root, dir.path() + "/registry");
  REQUIRE(follower.Resume({{kFirstEventFileStream, prefix.size()}}).ok());
  const std::vector<EventFileFollower::Read> reads = follower.Poll(true);
  for (const EventFileFollower::Read& read : reads) {
    CHECK(read.end >= prefix.size());  // nothing before the offset is read again as new
    CHECK(read.scalars.empty());
  }
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    out.push_back(line);
  }
  return out;
}

// One event file of `n` scalars of tag "loss" at steps 0..n-1.
void WriteScalars(const std::string& dir, int n, double wall_time) {
  std::vector<tensorboard::Scalar> scalars;
  for (int i = 0; i < n; ++i) {
    tensorboard::Scalar s;
    s.tag = "loss";
    s.step = i;
    s.value = 1.0 / (i + 1);
    s.wall_time = wall_time + i;
    scalars.push_back(s);
  }
  REQUIRE(tensorboard::WriteEventFile(dir, scalars, wall_time).ok());
}

TEST_CASE("the follower walks a job's big tree a slice a poll, and finds every event file",
          "[tensorboard]") {
  testing::TempDir dir;
  const std::string root = dir.path() + "/logs";
  // 10,000 files a job made that are not event files (a dataset cache, say), and 3 that are.
  for (int d = 0; d < 10; ++d) {
    const std::string sub = root + "/cache/" + std::to_string(d);
    std::filesystem::create_directories(sub);
    for (int i = 0; i < 1000; ++i) {
      std::ofstream(sub + "/" + std::to_string(i));
    }
  }
  for (int i = 0; i < 3; ++i) {
    WriteScalars(root + "/run" + std::to_string(i), 5, 1000.0 + i);
  }
  EventFileFollower follower(root, dir.path() + "/registry");
  const int entries = 10000 + 10 + 1 + 3 + 3;  // files, their directories, cache/, run dirs
  int walked = 0;
  int polls = 0;
  size_t scalars = 0;
  while (walked < entries) {
    for (const EventFileFollower::Read& read : follower.Poll(false)) {
      scalars += read.scalars.size();
    }
    CHECK(follower.last_walk_entries() <= kWalkEntriesPerPoll);
    walked += follower.last_walk_entries();
    ++polls;
  }
  CHECK(walked == entries);
  CHECK(polls == (entries + kWalkEntriesPerPoll - 1) / kWalkEntriesPerPoll);
  CHECK(scalars == 15);
  // One line per file, found once.
  std::vector<std::string> registry = Lines(dir.path() + "/registry");
  CHECK(registry.size() == 3);
  // A new walk starts: nothing is found twice.
  follower.Poll(false);
  CHECK(Lines(dir.path() + "/registry").size() == 3);
}

TEST_CASE("the end of a job walks the whole tree at once", "[tensorboard]") {
  testing::TempDir dir;
  const std::string root = dir.path() + "/logs";
  std::filesystem::create_directories(root + "/cache");
  for (int i = 0; i < 2 * kWalkEntriesPerPoll; ++i) {
    std::ofstream(root + "/cache/" + std::to_string(i));
  }
  WriteScalars(root + "/late", 4, 1000.0);
  EventFileFollower follower(root, dir.path() + "/registry");
  size_t scalars = 0;
  for (const EventFileFollower::Read& read : follower.Poll(true)) {
    scalars += read.scalars.size();
  }
  CHECK(scalars == 4);
  CHECK(follower.last_walk_entries() > kWalkEntriesPerPoll);
}

TEST_CASE("a torn last registry line is dropped at a restart and its file found again",
          "[tensorboard]") {
  testing::TempDir dir;
  const std::string root = dir.path() + "/logs";
  WriteScalars(root + "/a", 3, 1000.0);
  WriteScalars(root + "/b", 2, 2000.0);
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    if (entry.is_regular_file()) {
      names.push_back(std::filesystem::relative(entry.path(), root).string());
    }
  }
  std::sort(names.begin(), names.end());
  REQUIRE(names.size() == 2);
  // a's points were journaled up to its end; the append naming b was torn by a crash.
  dir.Write("registry", names[0] + "\n" + names[1].substr(0, 5));
  EventFileFollower follower(root, dir.path() + "/registry");
  REQUIRE(
      follower.Resume({{kFirstEventFileStream, std::filesystem::file_size(root + "/" + names[0])}})
          .ok());
  CHECK(Lines(dir.path() + "/registry") == std::vector<std::string>{names[0]});
  std::vector<EventFileFollower::Read> reads = follower.Poll(false);
  REQUIRE(reads.size() == 1);
  CHECK(reads[0].path == names[1]);
  CHECK(reads[0].stream == kFirstEventFileStream + 1);
  CHECK(reads[0].scalars.size() == 2);
  CHECK(Lines(dir.path() + "/registry") == names);
}

TEST_CASE("at most kMaxEventFiles files are followed, and the first left out is named",
          "[tensorboard]") {
  testing::TempDir dir;
  const std::string root = dir.path() + "/logs";
  std::filesystem::create_directories(root);
  for (size_t i = 0; i < kMaxEventFiles + 5; ++i) {
    std::ofstream(root + "/" + std::to_string(100000 + i) + ".tfevents");
  }
  EventFileFollower follower(root, dir.path() + "/registry");
  follower.Poll(false);
  follower.Poll(true);
  CHECK(Lines(dir.path() + "/registry").size() == kMaxEventFiles);
  const std::vector<std::string> notes = follower.TakeNotes();
  REQUIRE(notes.size() == 1);
  CHECK_THAT(notes[0], Catch::Contains(std::to_string(100000 + kMaxEventFiles) + ".tfevents"));
  CHECK(follower.TakeNotes().empty());
}

}  // namespace
}  // namespace tae::agent
