// A job's TensorBoard files as the agent follows them (agent/runner/event_files.h): what a job
// can put there must not block or exhaust the agent.
#include "agent/runner/event_files.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <fstream>
#include <string>

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

}  // namespace
}  // namespace tae::agent
